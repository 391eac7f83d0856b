package lease

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/store"
)

// TestNodeIDHeldByOneProcess: a second process (another instance) asking
// for a node id whose lease is live is told to wait until that lease ends,
// naming the holder; the holder itself re-registers at once; once the
// holder's lease runs out (a crash) or it deregisters (a clean stop), the
// second gets the id.
func TestNodeIDHeldByOneProcess(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const ttl = 2 * time.Second

	first, err := f.st.NodeRegister(ctx, f.db.Pool, "n", "proc-1", ttl, "host-1", 101, false, 0)
	require.NoError(t, err)
	require.Empty(t, first.Wait)
	require.NotZero(t, first.Epoch)

	second, err := f.st.NodeRegister(ctx, f.db.Pool, "n", "proc-2", ttl, "host-2", 202, false, 0)
	require.NoError(t, err)
	require.Equal(t, store.WaitNodeID, second.Wait, "another process holds the id")
	require.Zero(t, second.Epoch)
	require.Equal(t, "host-1", second.HolderHost)
	require.Equal(t, 101, second.HolderPID)
	require.InDelta(t, ttl.Seconds(), second.WaitFor.Seconds(), 0.5, "until the holder's lease ends")

	// The row is still the first process's, and its term still renews.
	_, err = f.st.NodeRenew(ctx, f.db.Pool, "n", first.Epoch, ttl)
	require.NoError(t, err)

	// The holder re-registers (after losing its lease, say) without waiting.
	again, err := f.st.NodeRegister(ctx, f.db.Pool, "n", "proc-1", ttl, "host-1", 101, false, first.Epoch)
	require.NoError(t, err)
	require.Empty(t, again.Wait)
	require.Greater(t, again.Epoch, first.Epoch)

	// The holder crashes: once its lease has run out, the id is free.
	_, err = f.db.Pool.Exec(ctx, "UPDATE "+f.db.Schema+".nodes SET lease_expires_at = now() - interval '1 ms'")
	require.NoError(t, err)
	taken, err := f.st.NodeRegister(ctx, f.db.Pool, "n", "proc-2", ttl, "host-2", 202, false, 0)
	require.NoError(t, err)
	require.Empty(t, taken.Wait)
	_, err = f.st.NodeRenew(ctx, f.db.Pool, "n", again.Epoch, ttl)
	require.ErrorIs(t, err, store.ErrLeaseLost, "the crashed process's term is over")

	// A clean stop frees the id at once.
	require.NoError(t, f.st.NodeDeregister(ctx, f.db.Pool, "n", taken.Epoch))
	back, err := f.st.NodeRegister(ctx, f.db.Pool, "n", "proc-1", ttl, "host-1", 101, false, again.Epoch)
	require.NoError(t, err)
	require.Empty(t, back.Wait)
}

// TestNodeWaitsForItsID: a Node whose id another process holds does not
// hold a term, says why (Waiting), and takes the id as soon as the other
// deregisters.
func TestNodeWaitsForItsID(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	holder, stopHolder := f.runNode(t, "shared")

	n, err := NewNode(NodeConfig{ID: "shared", Store: f.st, DB: f.db.Pool, TTL: time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = n.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	require.Eventually(t, func() bool { return n.Waiting() != nil }, pgtest.Patience(10*time.Second), 5*time.Millisecond)
	require.Equal(t, store.WaitNodeID, n.Waiting().Reason)
	require.Contains(t, n.Waiting().Error(), "two processes must not share a node id")
	require.Nil(t, n.Current(), "no term while another process holds the id")
	require.NotNil(t, holder.Current(), "the holder keeps its term")

	stopHolder() // deregisters
	require.Eventually(t, func() bool { return n.Current() != nil }, pgtest.Patience(10*time.Second), 5*time.Millisecond)
	require.Nil(t, n.Waiting())
}

// promoteInPlace makes the test's schema look as a promoted standby's
// does: its rows were written on another (older) timeline than the one the
// server is on now. The first registration afterwards sees a new timeline.
func promoteInPlace(t *testing.T, f fixture) {
	t.Helper()
	_, err := f.db.Pool.Exec(context.Background(), fmt.Sprintf(`
		UPDATE %[1]s.timelines SET timeline = -7;
		UPDATE %[1]s.nodes SET timeline = -7;`, f.db.Schema))
	require.NoError(t, err)
}

// TestFailoverWaitsOutOldLeases: on a server whose timeline changed under
// the rows (a standby promoted after asynchronous replication lost the
// last renewals), a term of the old timeline can neither renew nor claim,
// even while this server thinks its lease is live; nobody registers until
// a full TTL after the first try, by which time every node of the old
// primary has stopped by its own clock; then registration works again.
func TestFailoverWaitsOutOldLeases(t *testing.T) {
	t.Parallel()
	skipOnCitus(t)
	f := newFixture(t)
	ctx := context.Background()
	const ttl = 2 * time.Second
	a, err := f.st.NodeRegister(ctx, f.db.Pool, "a", "proc-a", ttl, "h", 1, false, 0)
	require.NoError(t, err)
	require.Empty(t, a.Wait, "a new schema's first registration does not wait")
	_, err = f.st.ScheduleMany(ctx, f.db.Pool, []store.NewTask{{OrderingID: "o", ScheduledAt: time.Now()}}, false)
	require.NoError(t, err)

	promoteInPlace(t, f)
	// The lease still looks live here; the old term is refused anyway.
	_, err = f.st.NodeRenew(ctx, f.db.Pool, "a", a.Epoch, ttl)
	require.ErrorIs(t, err, store.ErrLeaseLost, "a term of the old timeline does not renew")
	claimed, err := f.st.Claim(ctx, f.db.Pool, "a", a.Epoch, allPartitions(t, f), 10, 0)
	require.NoError(t, err)
	require.Empty(t, claimed, "a term of the old timeline claims nothing")

	first := time.Now()
	w, err := f.st.NodeRegister(ctx, f.db.Pool, "b", "proc-b", ttl, "h", 2, false, 0)
	require.NoError(t, err)
	require.Equal(t, store.WaitFailover, w.Wait)
	require.Zero(t, w.Epoch)
	require.GreaterOrEqual(t, w.WaitFor, ttl-100*time.Millisecond, "a full TTL")
	require.NotZero(t, w.Timeline)

	// Until then nobody registers, the old node included.
	w2, err := f.st.NodeRegister(ctx, f.db.Pool, "a", "proc-a", ttl, "h", 1, false, a.Epoch)
	require.NoError(t, err)
	require.Equal(t, store.WaitFailover, w2.Wait)

	var b store.Registration
	require.Eventually(t, func() bool {
		b, err = f.st.NodeRegister(ctx, f.db.Pool, "b", "proc-b", ttl, "h", 2, false, 0)
		require.NoError(t, err)
		return b.Wait == ""
	}, pgtest.Patience(10*time.Second), 20*time.Millisecond, "after the hold, nodes register")
	require.GreaterOrEqual(t, time.Since(first), w.WaitFor, "not before")
	claimed, err = f.st.Claim(ctx, f.db.Pool, "b", b.Epoch, allPartitions(t, f), 10, 0)
	require.NoError(t, err)
	require.Len(t, claimed, 1, "the new term claims")
}

// TestEpochsNeverGoBack: a node's new epoch is above the last one it held,
// even when the epoch sequence went back (a promoted standby may hand out
// values the old primary already did).
func TestEpochsNeverGoBack(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	r, err := f.st.NodeRegister(ctx, f.db.Pool, "n", "p", time.Second, "h", 1, false, 1_000_000)
	require.NoError(t, err)
	require.Equal(t, int64(1_000_001), r.Epoch)
}

// TestNodeReportsFailoverWait: a running Node on a server whose timeline
// changed loses its term, says it waits out the failover, and holds a new
// term once the hold has passed.
func TestNodeReportsFailoverWait(t *testing.T) {
	t.Parallel()
	skipOnCitus(t)
	f := newFixture(t)
	n, _ := f.runNode(t, "x")
	old := n.Current()
	promoteInPlace(t, f)
	require.Eventually(t, func() bool { return n.Waiting() != nil }, pgtest.Patience(10*time.Second), 5*time.Millisecond)
	require.Equal(t, store.WaitFailover, n.Waiting().Reason)
	require.ErrorIs(t, old.Check(), ErrExpired)
	var wait *WaitError
	require.True(t, errors.As(error(n.Waiting()), &wait))
	require.Contains(t, wait.Error(), "failover")
	require.Eventually(t, func() bool { return n.Current() != nil }, pgtest.Patience(10*time.Second), 5*time.Millisecond)
	require.Greater(t, n.Current().Epoch, old.Epoch)
}

func allPartitions(t *testing.T, f fixture) []int32 {
	t.Helper()
	s, err := f.st.Settings(context.Background(), f.db.Pool)
	require.NoError(t, err)
	parts := make([]int32, s.PartitionCount)
	for i := range parts {
		parts[i] = int32(i)
	}
	return parts
}

// skipOnCitus skips a test of the failover fencing, which Citus has none
// of: every server there has a timeline of its own, so pgsched.timeline()
// is 0 and no term is tied to one.
func skipOnCitus(t *testing.T) {
	t.Helper()
	if pgtest.Citus() {
		t.Skip("on Citus pgsched.timeline() is 0: terms are not tied to a timeline (docs/design.md, \"A database failover\")")
	}
}
