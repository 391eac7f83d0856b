package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/dispatch"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/pgschedtype"
)

// TestLaterTaskOfADuePartitionStartsOnTime: a claim takes what is due
// within ClaimAhead; a task of the same partition due a little later
// must start when it is due, not when the poll interval next comes round.
// One partition holds two tasks, due 300 ms and 1.3 s after the enqueue,
// and nothing else wakes the node (one enqueue, a one-hour poll
// interval): the second must start on time. The bound leaves a slow
// machine plenty; without a new look at the partition after the first
// claim the second waits the hour.
func TestLaterTaskOfADuePartitionStartsOnTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, st, client, node := newNode(t, pgtest.SchemaOptions{Partitions: 1, TablePartitions: 1}, 2*time.Second)
	type start struct {
		orderingID string
		late       time.Duration
	}
	started := make(chan start, 2)
	wake := make(chan struct{}, 1)
	d, err := dispatch.New(dispatch.Config{
		Store: st, DB: db.Pool, Node: node, Partitions: func() []int32 { return []int32{0} },
		Concurrency: 10, Prefetch: 10, PollInterval: time.Hour, ClaimAhead: 25 * time.Millisecond, Wake: wake,
		FinishBatch: 1000, FinishDelay: time.Millisecond, DrainTimeout: 10 * time.Second,
		Exec: func(_ context.Context, job *dispatch.Job) dispatch.Result {
			started <- start{job.OrderingID, time.Since(job.ScheduledAt)}
			return dispatch.Result{Outcome: pgschedtype.OutcomeCompleted}
		},
	})
	require.NoError(t, err)
	run(t, node, d)

	now := time.Now()
	_, err = client.ScheduleMany(ctx, []pgsched.Task{
		{OrderingID: "soon", ScheduledAt: now.Add(300 * time.Millisecond)},
		{OrderingID: "later", ScheduledAt: now.Add(1300 * time.Millisecond)},
	})
	require.NoError(t, err)
	wake <- struct{}{} // the enqueue's NOTIFY, as the worker passes it on
	for _, want := range []string{"soon", "later"} {
		select {
		case s := <-started:
			require.Equal(t, want, s.orderingID)
			require.Less(t, s.late, pgtest.Patience(10*time.Second), "%s started %s after it was due", s.orderingID, s.late)
		case <-time.After(pgtest.Patience(20 * time.Second)):
			t.Fatalf("%s has not started 20 s after it was due", want)
		}
	}
}
