package pgschedui

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestThrottleLockOutGrowsToBound: the free failures lock nothing; each
// one after locks out twice as long as the last, up to the bound; a
// failure after a quiet spell counts from zero again.
func TestThrottleLockOutGrowsToBound(t *testing.T) {
	t.Parallel()
	l := newThrottle().perAddr
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var s strikes
	for n, want := range []time.Duration{0, 0, 0, 0, 0, 1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
		16 * time.Second, 32 * time.Second, 64 * time.Second, 128 * time.Second, 256 * time.Second, 512 * time.Second,
		10 * time.Minute, 10 * time.Minute, 10 * time.Minute} {
		s.fail(now, l)
		require.Equal(t, n+1, s.failures)
		require.Equal(t, want, max(s.until.Sub(now), 0), "failure %d", n+1)
		now = later(now, s.until)
	}
	for range 1000 { // no overflow however long it goes on
		s.fail(now, l)
		require.Equal(t, 10*time.Minute, s.until.Sub(now))
		now = s.until
	}
	now = now.Add(l.forget)
	s.fail(now, l)
	require.Equal(t, 1, s.failures, "forgotten after a quiet hour")
	require.False(t, s.until.After(now))
}

// TestThrottleKeepsFewAddresses: failures from more addresses than it
// holds do not grow it, and do not push out an address that is locked
// out while others are not.
func TestThrottleKeepsFewAddresses(t *testing.T) {
	t.Parallel()
	th := newThrottle()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	th.now = func() time.Time { return now }
	th.maxAddrs = 64
	th.everyone.free = 1 << 30 // this test is about addresses
	wrong := func() bool { return false }
	for a := (attempt{}); a.failures < 10; {
		if a = th.try("203.0.113.7:1", wrong); !a.tried {
			now = now.Add(a.wait)
		}
	}
	locked := th.try("203.0.113.7:1", wrong)
	require.False(t, locked.tried)
	require.Equal(t, 16*time.Second, locked.wait, "the 10th failure's lock-out")
	for i := range 2000 {
		a := th.try(fmt.Sprintf("[2001:db8:%x::1]:443", i), wrong)
		require.True(t, a.tried)
		a = th.try(fmt.Sprintf("10.%d.%d.%d:443", i>>16, i>>8&0xff, i&0xff), wrong)
		require.True(t, a.tried)
		require.LessOrEqual(t, len(th.addrs), th.maxAddrs)
	}
	require.False(t, th.try("203.0.113.7:1", wrong).tried, "the locked-out address is still locked out")
	// An hour later every failure is forgotten: the next address to fail
	// sweeps them all out.
	now = now.Add(th.perAddr.forget)
	th.try("198.51.100.1:1", wrong)
	require.Len(t, th.addrs, 1)
}

// TestAddrKey: one client is one address whatever its port, one IPv6 /64,
// or IPv4 written as IPv6.
func TestAddrKey(t *testing.T) {
	t.Parallel()
	for _, same := range [][]string{
		{"203.0.113.7:1", "203.0.113.7:65000", "[::ffff:203.0.113.7]:2", "203.0.113.7"},
		{"[2001:db8::1]:1", "[2001:db8::ffff:1]:9", "[2001:db8:0:0:1:2:3:4]:80"},
		{"@", "pipe", ""},
	} {
		for _, addr := range same[1:] {
			require.Equal(t, addrKey(same[0]), addrKey(addr), "%s and %s", same[0], addr)
		}
	}
	require.NotEqual(t, addrKey("[2001:db8::1]:1"), addrKey("[2001:db8:0:1::1]:1"), "another /64")
	require.NotEqual(t, addrKey("203.0.113.7:1"), addrKey("203.0.113.8:1"))
	require.Equal(t, netip.MustParsePrefix("2001:db8::/64"), addrKey("[2001:db8::1]:1"))
}
