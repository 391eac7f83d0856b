package dispatch_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/dispatch"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/pgschedtype"
)

// TestQueuedGivenBackWhenTermEnds: claimed tasks waiting for a handler
// belong to the term that claimed them. When the term ends they go back
// at once, even while every handler is held by one that ignores its
// cancelled context: otherwise they would count against the node's
// capacity until a handler came free, and the node would claim nothing
// under its new term. Here two handlers are stuck; three tasks wait behind
// them; the node loses its term (and on registering again gives back what
// the old term held). The new term must claim the three again while the
// two are still stuck, and each of the three runs once.
func TestQueuedGivenBackWhenTermEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, st, client, node := newNode(t, pgtest.SchemaOptions{}, 600*time.Millisecond)
	all := make([]int32, 8)
	for i := range all {
		all[i] = int32(i)
	}
	stuck := make(chan struct{})     // closed to let the stuck handlers return
	started := make(chan string, 10) // kinds of started handlers
	var mu sync.Mutex
	runs := map[string]int{} // ordering_id -> runs
	d, err := dispatch.New(dispatch.Config{
		Store: st, DB: db.Pool, Node: node, Partitions: func() []int32 { return all },
		Concurrency: 2, Prefetch: 5, PollInterval: 20 * time.Millisecond,
		FinishBatch: 1000, FinishDelay: time.Millisecond, DrainTimeout: 10 * time.Second,
		Exec: func(ctx context.Context, job *dispatch.Job) dispatch.Result {
			mu.Lock()
			runs[job.OrderingID]++
			mu.Unlock()
			started <- job.Kind
			if job.Kind == "stuck" {
				<-stuck // ignores ctx, as a misbehaving handler would
			}
			return dispatch.Result{Outcome: pgschedtype.OutcomeCompleted}
		},
	})
	require.NoError(t, err)
	run(t, node, d)
	first := node.Current().Epoch
	t.Cleanup(func() {
		select {
		case <-stuck:
		default:
			close(stuck)
		}
	})

	now := time.Now()
	_, err = client.ScheduleMany(ctx, []pgsched.Task{
		{OrderingID: "s1", ScheduledAt: now, Kind: "stuck"},
		{OrderingID: "s2", ScheduledAt: now, Kind: "stuck"},
	})
	require.NoError(t, err)
	for range 2 {
		require.Equal(t, "stuck", <-started)
	}
	_, err = client.ScheduleMany(ctx, []pgsched.Task{
		// Earlier than the stuck ones: claims take the longest waiting first.
		{OrderingID: "a", ScheduledAt: now.Add(-time.Second)}, {OrderingID: "b", ScheduledAt: now.Add(-time.Second)},
		{OrderingID: "c", ScheduledAt: now.Add(-time.Second)},
	})
	require.NoError(t, err)
	// running counts a, b and c running under the first term (or, with
	// later, under any other).
	running := func(later bool) int {
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+db.Schema+
			".heads WHERE running AND ordering_id IN ('a', 'b', 'c') AND (epoch = $1) <> $2", first, later).Scan(&n))
		return n
	}
	require.Eventually(t, func() bool { return running(false) == 3 }, pgtest.Patience(10*time.Second), 5*time.Millisecond,
		"a, b and c claimed, waiting behind the stuck handlers")

	// The term ends: another epoch takes the node's row, so renewal fails.
	_, err = db.Pool.Exec(ctx, "UPDATE "+db.Schema+".nodes SET epoch = epoch + 1000 WHERE node_id = 'n1'")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return running(true) == 3 }, pgtest.Patience(10*time.Second), 5*time.Millisecond,
		"a, b and c claimed again by the new term while the handlers are still stuck")

	close(stuck)
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+db.Schema+".tasks").Scan(&n))
		return n == 0
	}, pgtest.Patience(10*time.Second), 5*time.Millisecond, "every task done")
	mu.Lock()
	defer mu.Unlock()
	for _, o := range []string{"a", "b", "c"} {
		require.Equal(t, 1, runs[o], "%s ran once: the first term's claim of it never started", o)
	}
}
