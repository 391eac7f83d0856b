package pgsched_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
)

// TestRetryPolicyBackoff: the delay after the n-th failed run is
// MinBackoff doubled n-1 times, capped at MaxBackoff, then spread by up to
// Jitter either way; unset fields take their documented defaults (1s, 5m,
// 0.2). And the worker waits that long: a failed run of a kind with its
// own policy is due again after that kind's backoff.
func TestRetryPolicyBackoff(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	exact := pgsched.RetryPolicy{MinBackoff: 100 * ms, MaxBackoff: time.Second, Jitter: -1}
	half := pgsched.RetryPolicy{MinBackoff: 100 * ms, MaxBackoff: time.Second, Jitter: 0.5}
	for _, c := range []struct {
		name    string
		policy  pgsched.RetryPolicy
		attempt int
		rnd     float64
		want    time.Duration
	}{
		{"first", exact, 1, 0.3, 100 * ms},
		{"doubles", exact, 2, 0.3, 200 * ms},
		{"doubles again", exact, 3, 0.3, 400 * ms},
		{"and again", exact, 4, 0.3, 800 * ms},
		{"capped", exact, 5, 0.3, time.Second},
		{"stays capped", exact, 60, 0.3, time.Second},
		{"jitter low end", half, 3, 0, 200 * ms},
		{"jitter middle", half, 3, 0.5, 400 * ms},
		{"jitter high end", half, 3, 0.75, 500 * ms},
		{"jitter on the cap", half, 9, 0, 500 * ms},
		{"defaults", pgsched.RetryPolicy{}, 1, 0.5, time.Second},
		{"default jitter", pgsched.RetryPolicy{}, 1, 0, 800 * ms},
		{"default cap", pgsched.RetryPolicy{}, 30, 0.5, 5 * time.Minute},
		{"cap below the minimum", pgsched.RetryPolicy{MinBackoff: time.Second, MaxBackoff: ms, Jitter: -1}, 3, 0.5, time.Second},
	} {
		require.Equal(t, c.want, c.policy.Backoff(c.attempt, c.rnd), "%s: attempt %d, rnd %v", c.name, c.attempt, c.rnd)
	}

	b := setupClient(t)
	ctx := context.Background()
	cfg := fastConfig(b.db.Schema)
	failed := make(chan time.Time, 1)
	cfg.Handlers = map[string]pgsched.Handler{"slow-retry": pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error {
		failed <- time.Now()
		return errors.New("fails once, then waits for its backoff")
	})}
	cfg.KindRetry = map[string]pgsched.RetryPolicy{"slow-retry": {MinBackoff: time.Hour, Jitter: -1}}
	outcomes := watchOutcomes(&cfg)
	startWorker(t, b.db, cfg)
	_, err := b.client.Schedule(ctx, pgsched.Task{OrderingID: "backoff", ScheduledAt: time.Now(), Kind: "slow-retry"})
	require.NoError(t, err)
	var ranAt time.Time
	select {
	case ranAt = <-failed:
	case <-time.After(pgtest.Patience(10 * time.Second)):
		t.Fatal("the task did not run")
	}
	outcomes.waitFor(t, 10*time.Second, func(l *outcomeLog) bool { return l.count("retry") == 1 }, "the failure recorded")
	var runAt time.Time
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT run_at FROM "+b.db.Schema+".tasks WHERE ordering_id = 'backoff'").Scan(&runAt))
	wait := runAt.Sub(ranAt)
	require.True(t, wait > 59*time.Minute && wait < 61*time.Minute, "due again after the kind's backoff of 1h, not %s", wait)
}

// TestScheduleManyTxOnlyIfCommitted: ScheduleManyTx enqueues in the
// caller's transaction, as ScheduleTx does: nothing of the batch is seen
// outside it before it commits, nothing is left if it rolls back, and all
// of it is there once it commits.
func TestScheduleManyTxOnlyIfCommitted(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	at := time.Now().Add(time.Hour)
	batch := func(prefix string) []pgsched.Task {
		return []pgsched.Task{
			{OrderingID: prefix + "-a", ScheduledAt: at},
			{OrderingID: prefix + "-a", ScheduledAt: at.Add(time.Second)},
			{OrderingID: prefix + "-b", ScheduledAt: at},
		}
	}
	for _, commit := range []bool{false, true} {
		tx, err := b.db.Pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }() // a failure must not leave it open: the pool's Close waits for it
		res, err := b.client.ScheduleManyTx(ctx, tx, batch(fmt.Sprint("commit-", commit)))
		require.NoError(t, err)
		require.Equal(t, []pgsched.Result{pgsched.Inserted, pgsched.Inserted, pgsched.Inserted}, res)
		require.Zero(t, countRows(t, b, "tasks"), "nothing seen outside the transaction before it commits")
		if commit {
			require.NoError(t, tx.Commit(ctx))
		} else {
			require.NoError(t, tx.Rollback(ctx))
			require.Zero(t, countRows(t, b, "tasks"), "nothing left by a rolled back transaction")
		}
	}
	var n int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+b.db.Schema+".tasks WHERE ordering_id LIKE 'commit-true-%'").Scan(&n))
	require.Equal(t, 3, n, "the committed batch is all there")
	require.Equal(t, 3, countRows(t, b, "tasks"))
}

// TestCheckFenceReadsTheTerm: pgsched.CheckFence, which handlers (and the
// webhook executor) call right before an irreversible step, passes while
// the node holds the lease its handler runs under, and fails with
// ErrLeaseExpired once that term is over, also for a context detached
// from the handler's cancellation (context.WithoutCancel keeps its
// values): the fence is the term, not the context's Done. A context that
// is not a handler's passes.
func TestCheckFenceReadsTheTerm(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	cfg := fastConfig(b.db.Schema)
	cfg.NodeID = "fence-node"
	type checks struct{ live, over, detached, other error }
	started := make(chan struct{}, 1)
	seen := make(chan checks, 1)
	cfg.Handlers = map[string]pgsched.Handler{"*": pgsched.HandlerFunc(func(hctx context.Context, _ *pgsched.Job) error {
		live := pgsched.CheckFence(hctx)
		started <- struct{}{}
		select {
		case <-hctx.Done(): // the test takes the node's lease away
		case <-time.After(pgtest.Patience(20 * time.Second)):
		}
		seen <- checks{live: live, over: pgsched.CheckFence(hctx), detached: pgsched.CheckFence(context.WithoutCancel(hctx)),
			other: pgsched.CheckFence(context.Background())}
		return hctx.Err()
	})}
	startWorker(t, b.db, cfg)
	_, err := b.client.Schedule(ctx, pgsched.Task{OrderingID: "fenced", ScheduledAt: time.Now()})
	require.NoError(t, err)
	select {
	case <-started:
	case <-time.After(pgtest.Patience(10 * time.Second)):
		t.Fatal("the handler did not start")
	}
	// The lease is gone (as when the leader depletes a node it took for
	// dead): the next renewal fails and the term ends.
	_, err = b.db.Pool.Exec(ctx, "DELETE FROM "+b.db.Schema+".nodes WHERE node_id = 'fence-node'")
	require.NoError(t, err)
	var c checks
	select {
	case c = <-seen:
	case <-time.After(pgtest.Patience(30 * time.Second)):
		t.Fatal("the handler did not return")
	}
	require.NoError(t, c.live, "while the term lasts")
	require.ErrorIs(t, c.over, pgsched.ErrLeaseExpired, "once the term is over")
	require.ErrorIs(t, c.detached, pgsched.ErrLeaseExpired, "a detached context still carries the term")
	require.NoError(t, c.other, "not a handler's context")
}
