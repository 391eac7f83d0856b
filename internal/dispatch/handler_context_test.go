package dispatch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/dispatch"
	"github.com/pgsched/pgsched/internal/lease"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/pgschedtype"
)

// TestHandlerContextEndsWithTerm: each handler's context is its own (an
// operator's cancel ends one task's only), yet all of them end when the
// node's term does, and the fence check they carry fails from then on.
// Three handlers wait on their contexts; one task is cancelled, and only
// its handler returns, with ErrCancelled as the cause; then the term ends
// and the other two return.
func TestHandlerContextEndsWithTerm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, st, client, node := newNode(t, pgtest.SchemaOptions{}, 600*time.Millisecond)
	all := make([]int32, 8)
	for i := range all {
		all[i] = int32(i)
	}
	type ended struct {
		orderingID string
		id         int64
		err, cause error
		fence      error
	}
	started := make(chan *dispatch.Job, 3)
	done := make(chan ended, 3)
	release := make(chan struct{}) // closed when the test ends, so no handler outlives it
	d, err := dispatch.New(dispatch.Config{
		Store: st, DB: db.Pool, Node: node, Partitions: func() []int32 { return all },
		Concurrency: 3, Prefetch: 0, PollInterval: 20 * time.Millisecond,
		FinishBatch: 1000, FinishDelay: time.Millisecond, DrainTimeout: 10 * time.Second,
		Exec: func(ctx context.Context, job *dispatch.Job) dispatch.Result {
			if err := dispatch.CheckFence(ctx); err != nil {
				return dispatch.Result{Outcome: pgschedtype.OutcomeRelease}
			}
			started <- job
			select {
			case <-ctx.Done():
			case <-release:
				return dispatch.Result{Outcome: pgschedtype.OutcomeRelease}
			}
			done <- ended{orderingID: job.OrderingID, id: job.ID, err: ctx.Err(), cause: context.Cause(ctx), fence: dispatch.CheckFence(ctx)}
			return dispatch.Result{Outcome: pgschedtype.OutcomeRetry, RetryIn: time.Hour, Error: "ended"}
		},
	})
	require.NoError(t, err)
	run(t, node, d)
	t.Cleanup(func() { close(release) })

	now := time.Now()
	_, err = client.ScheduleMany(ctx, []pgsched.Task{
		{OrderingID: "a", ScheduledAt: now}, {OrderingID: "b", ScheduledAt: now}, {OrderingID: "c", ScheduledAt: now},
	})
	require.NoError(t, err)
	jobs := map[string]*dispatch.Job{}
	for range 3 {
		j := <-started
		jobs[j.OrderingID] = j
	}

	d.CancelTasks(map[int64]bool{jobs["b"].ID: true})
	e := <-done
	require.Equal(t, "b", e.orderingID, "only the cancelled task's context ended")
	require.ErrorIs(t, e.err, context.Canceled)
	require.ErrorIs(t, e.cause, dispatch.ErrCancelled)
	require.NoError(t, e.fence, "the term is still live")
	select {
	case e := <-done:
		t.Fatalf("%s's context ended with another task's cancel: %v", e.orderingID, e.cause)
	case <-time.After(50 * time.Millisecond):
	}

	// The term ends: another epoch takes the node's row, so renewal fails.
	_, err = db.Pool.Exec(ctx, "UPDATE "+db.Schema+".nodes SET epoch = epoch + 1000 WHERE node_id = 'n1'")
	require.NoError(t, err)
	got := map[string]ended{}
	for range 2 {
		select {
		case e := <-done:
			got[e.orderingID] = e
		case <-time.After(pgtest.Patience(10 * time.Second)):
			t.Fatalf("a handler's context outlived the term; ended so far: %v", got)
		}
	}
	for _, o := range []string{"a", "c"} {
		e, ok := got[o]
		require.True(t, ok, "%s's context ended with the term", o)
		require.ErrorIs(t, e.err, context.Canceled)
		require.False(t, errors.Is(e.cause, dispatch.ErrCancelled), "%s was not cancelled by an operator", o)
		require.ErrorIs(t, e.fence, lease.ErrExpired, "%s's fence check fails once its term ended", o)
	}
}
