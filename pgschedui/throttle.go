package pgschedui

import (
	"net/netip"
	"sync"
	"time"
)

// throttle slows down guessing the console's token. Each client address
// (an IPv4 address, or an IPv6 /64: what one client can easily switch
// between) has a few free failed sign-ins; each failure after those locks
// the address out for twice as long as the last, up to a bound. All
// addresses together have a larger allowance and a shorter bound, so
// guesses spread over many addresses are slowed too. While locked out, a
// sign-in is refused without its token being compared, the right token
// included, so guessing on during a lock-out learns nothing. A right
// token forgets its address's failures.
//
// It keeps at most maxAddrs addresses: when full, it drops the addresses
// whose failures are forgotten, then the one whose lock-out ends first,
// so an attack from many addresses cannot grow it; those are still held
// back by the limit for everyone.
//
// Behind a reverse proxy every sign-in comes from the proxy's address,
// and the per-address limit acts as a second limit for everyone:
// X-Forwarded-For is the client's to write, so it is not trusted.
type throttle struct {
	now func() time.Time
	// perAddr and everyone are the limits per address and for all.
	perAddr, everyone limits
	maxAddrs          int

	mu     sync.Mutex
	addrs  map[netip.Prefix]strikes
	global strikes
}

// limits are a number of free failures, the lock-out after the next one,
// doubled at each failure after that up to max, and how long after the
// last failure the count starts again from zero.
type limits struct {
	free      int
	base, max time.Duration
	forget    time.Duration
}

// strikes are failed sign-ins in a row.
type strikes struct {
	failures int
	last     time.Time // of the last failure
	until    time.Time // the lock-out's end: no attempt before
}

func newThrottle() *throttle {
	return &throttle{
		now:      time.Now,
		perAddr:  limits{free: 5, base: time.Second, max: 10 * time.Minute, forget: time.Hour},
		everyone: limits{free: 50, base: time.Second, max: time.Minute, forget: 10 * time.Minute},
		maxAddrs: 4096,
		addrs:    map[netip.Prefix]strikes{},
	}
}

// fail counts a failure at now and starts its lock-out, if any.
func (s *strikes) fail(now time.Time, l limits) {
	if now.Sub(s.last) >= l.forget {
		s.failures = 0
	}
	s.failures++
	s.last = now
	if over := s.failures - l.free; over > 0 {
		lock := l.base
		for i := 1; i < over && lock < l.max; i++ {
			lock *= 2
		}
		s.until = now.Add(min(lock, l.max))
	}
}

// attempt is how a sign-in went.
type attempt struct {
	// tried is whether the token was compared: false while the address,
	// or everyone, is locked out.
	tried, ok bool
	// failures is the address's failed sign-ins in a row, this one
	// included.
	failures int
	// wait is how long the address is locked out from now on.
	wait time.Duration
}

// try runs check, which compares the token, for a sign-in from remote
// (http.Request.RemoteAddr) unless remote or everyone is locked out, and
// counts a failure against both. Attempts run one at a time, so a burst
// sent at once cannot slip through before the first failure locks out.
func (t *throttle) try(remote string, check func() bool) attempt {
	key := addrKey(remote)
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	s := t.addrs[key]
	if until := later(s.until, t.global.until); until.After(now) {
		return attempt{wait: until.Sub(now), failures: s.failures}
	}
	if check() {
		delete(t.addrs, key)
		return attempt{tried: true, ok: true}
	}
	if _, known := t.addrs[key]; !known && len(t.addrs) >= t.maxAddrs {
		t.evict(now)
	}
	s.fail(now, t.perAddr)
	t.addrs[key] = s
	t.global.fail(now, t.everyone)
	a := attempt{tried: true, failures: s.failures}
	if until := later(s.until, t.global.until); until.After(now) {
		a.wait = until.Sub(now)
	}
	return a
}

// evict makes room for one more address: it drops every address whose
// failures are forgotten and not locked out, or else the one whose
// lock-out ends first.
func (t *throttle) evict(now time.Time) {
	var (
		first    netip.Prefix
		firstEnd time.Time
		found    bool
	)
	for k, s := range t.addrs {
		if now.Sub(s.last) >= t.perAddr.forget && !s.until.After(now) {
			delete(t.addrs, k)
			continue
		}
		if !found || s.until.Before(firstEnd) {
			first, firstEnd, found = k, s.until, true
		}
	}
	if len(t.addrs) >= t.maxAddrs {
		delete(t.addrs, first)
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// addrKey is the address a request comes from: its IPv4 address, or its
// IPv6 /64. A RemoteAddr that is no IP address (a Unix socket) is the
// zero prefix, one address for all such requests.
func addrKey(remote string) netip.Prefix {
	var addr netip.Addr
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		addr = ap.Addr()
	} else if addr, err = netip.ParseAddr(remote); err != nil {
		return netip.Prefix{}
	}
	addr = addr.Unmap()
	bits := 32
	if addr.Is6() {
		bits = 64
	}
	p, _ := addr.Prefix(bits)
	return p
}
