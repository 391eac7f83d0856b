package dispatch

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/lease"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedtype"
)

// TestQueuedJobOfAnEndedTermIsNotStarted: a handler goroutine that takes a
// job after the job's term ended, before the dispatcher gave the job
// back, gives it back instead of running it. A node thawing from a freeze
// gets there: its goroutines wake in an order of the runtime's choosing,
// and any may take a queued job before the lease goroutine or the
// dispatcher's loop notices the lost term (TestThawedNodeStartsNothingOfItsTerm
// shows it across processes, where which goroutine goes first varies).
// Here the term has ended before the job is started, with no loop running
// to give it back, so only the check before each start stands between
// the job and its handler.
func TestQueuedJobOfAnEndedTermIsNotStarted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	st, err := store.Open(ctx, db.Pool, db.Schema)
	require.NoError(t, err)
	node, err := lease.NewNode(lease.NodeConfig{ID: "thaw", Store: st, DB: db.Pool, TTL: 2 * time.Second})
	require.NoError(t, err)
	nodeCtx, nodeStop := context.WithCancel(ctx)
	nodeDone := make(chan struct{})
	go func() { defer close(nodeDone); _ = node.Run(nodeCtx) }()
	require.Eventually(t, func() bool { return node.Current() != nil }, pgtest.Patience(10*time.Second), 5*time.Millisecond)
	term := node.Current()
	nodeStop()
	<-nodeDone
	require.False(t, term.Live(), "the term outlived its node")

	var ran atomic.Int32
	d, err := New(Config{
		Store: st, DB: db.Pool, Node: node, Partitions: func() []int32 { return []int32{0} },
		Concurrency: 1, Prefetch: 1, PollInterval: time.Hour, ClaimAhead: 25 * time.Millisecond,
		FinishBatch: 1000, FinishDelay: time.Millisecond, DrainTimeout: time.Second,
		Exec: func(context.Context, *Job) Result {
			ran.Add(1)
			return Result{Outcome: pgschedtype.OutcomeCompleted}
		},
	})
	require.NoError(t, err)
	now := time.Now()
	job := &Job{Claimed: &store.Claimed{ID: 1, OrderingID: "o", ClaimedAt: now, RunAt: now, ScheduledAt: now, Attempt: 1},
		Epoch: term.Epoch, Received: now}
	d.start(term, job)
	d.lanes.Wait()
	require.Zero(t, ran.Load(), "a job of an ended term was started")
	require.Equal(t, 1, d.finish.pending(), "the job is given back")
	d.finish.mu.Lock()
	defer d.finish.mu.Unlock()
	require.Equal(t, pgschedtype.OutcomeRelease, d.finish.items[0].res.Outcome)
}
