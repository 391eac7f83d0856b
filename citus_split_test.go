package pgsched_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedtype"
)

// onTwoWorkers schedules one task due now in partition 0 and one in
// partition 7 of a fresh 8-partition Citus schema, which live on
// different Citus workers, and returns the coordinator pool, the schema
// and the two ordering_ids.
func onTwoWorkers(t *testing.T) (*pgxpool.Pool, string, string, string) {
	t.Helper()
	plain, schema := citusSchema(t, 8)
	ctx := context.Background()
	var w0, w7 string
	require.NoError(t, plain.QueryRow(ctx, "SELECT min(worker) FILTER (WHERE partition_id = 0), min(worker) FILTER (WHERE partition_id = 7) FROM "+
		schema+".citus_placement").Scan(&w0, &w7))
	require.NotEqual(t, w0, w7, "partitions 0 and 7 live on different workers")
	client, err := pgsched.NewClient(plain, pgsched.ClientConfig{Schema: schema})
	require.NoError(t, err)
	ids := map[int]string{}
	for i := 0; ids[0] == "" || ids[7] == ""; i++ {
		id := fmt.Sprint("s-", i)
		if p := pgsched.Partition(id, 8); (p == 0 || p == 7) && ids[p] == "" {
			_, err := client.Schedule(ctx, pgsched.Task{OrderingID: id, ScheduledAt: time.Now()})
			require.NoError(t, err)
			ids[p] = id
		}
	}
	return plain, schema, ids[0], ids[7]
}

// TestCitusSplitFinishKeepsWhatCommitted: a finish split over two Citus
// workers commits on each alone. When the second call is refused, the
// first has committed: Finish returns what it applied with the error, so
// the node settles those outcomes instead of taking them for fenced when
// it writes the rest again.
func TestCitusSplitFinishKeepsWhatCommitted(t *testing.T) {
	t.Parallel()
	plain, schema, a, b := onTwoWorkers(t)
	ctx := context.Background()
	// The database refuses b's task as a dead task.
	_, err := plain.Exec(ctx, "ALTER TABLE "+schema+".dead_tasks ADD CONSTRAINT refuse_b CHECK (ordering_id <> '"+b+"')")
	require.NoError(t, err)

	st, err := store.NewCitus(schema)
	require.NoError(t, err)
	lease, err := st.NodeRegister(ctx, plain, "split", "test", time.Minute, "host", 1, false, 0)
	require.NoError(t, err)
	claimed, err := st.Claim(ctx, plain, "split", lease.Epoch, []int32{0, 7}, 10, time.Second)
	require.NoError(t, err)
	require.Len(t, claimed, 2)
	slices.SortFunc(claimed, func(x, y store.Claimed) int { return cmp.Compare(x.Partition, y.Partition) })
	outs := []store.Outcome{
		{Partition: claimed[0].Partition, OrderingID: claimed[0].OrderingID, ID: claimed[0].ID, ClaimedAt: claimed[0].ClaimedAt, Outcome: pgschedtype.OutcomeCompleted},
		{Partition: claimed[1].Partition, OrderingID: claimed[1].OrderingID, ID: claimed[1].ID, ClaimedAt: claimed[1].ClaimedAt, Outcome: pgschedtype.OutcomeDead, Error: "give up"},
	}
	res, err := st.Finish(ctx, plain, "split", lease.Epoch, outs, store.Handover{})
	require.ErrorContains(t, err, "refuse_b")
	require.Equal(t, []int64{claimed[0].ID}, res.Applied, "the first worker's part committed and says so")

	var completed int
	require.NoError(t, plain.QueryRow(ctx, "SELECT count(*) FROM "+schema+".completions WHERE ordering_id = $1", a).Scan(&completed))
	require.Equal(t, 1, completed)
	var running bool
	require.NoError(t, plain.QueryRow(ctx, "SELECT running FROM "+schema+".heads WHERE ordering_id = $1", b).Scan(&running))
	require.True(t, running, "the refused part changed nothing")
}

// TestCitusSplitClaimKeepsWhatCommitted: a claim split over two Citus
// workers commits on each alone. When the second call is refused, the
// first has committed: Claim returns its task with the error, so the node
// runs it instead of losing it until reconcile gives it back.
func TestCitusSplitClaimKeepsWhatCommitted(t *testing.T) {
	t.Parallel()
	plain, schema, a, b := onTwoWorkers(t)
	ctx := context.Background()
	// The database refuses to mark b's task running.
	_, err := plain.Exec(ctx, "ALTER TABLE "+schema+".heads ADD CONSTRAINT refuse_b CHECK (NOT running OR ordering_id <> '"+b+"')")
	require.NoError(t, err)

	st, err := store.NewCitus(schema)
	require.NoError(t, err)
	lease, err := st.NodeRegister(ctx, plain, "split", "test", time.Minute, "host", 1, false, 0)
	require.NoError(t, err)
	claimed, err := st.Claim(ctx, plain, "split", lease.Epoch, []int32{0, 7}, 10, time.Second)
	require.ErrorContains(t, err, "refuse_b")
	require.Len(t, claimed, 1, "the first worker's part committed and says so")
	require.Equal(t, a, claimed[0].OrderingID)
	var node string
	require.NoError(t, plain.QueryRow(ctx, "SELECT coalesce(node_id, '') FROM "+schema+".heads WHERE ordering_id = $1", a).Scan(&node))
	require.Equal(t, "split", node, "a is claimed by the node")
	require.NoError(t, plain.QueryRow(ctx, "SELECT coalesce(node_id, '') FROM "+schema+".heads WHERE ordering_id = $1", b).Scan(&node))
	require.Empty(t, node, "the refused part changed nothing")
}

// TestCitusSplitClaimRunsWhatCommitted: a worker node whose every claim
// splits over two Citus workers, the second part refused, runs the task
// the first part claimed (before, it lost it to reconcile, which gave it
// back to be claimed and lost again); the refused task runs once the
// database takes it.
func TestCitusSplitClaimRunsWhatCommitted(t *testing.T) {
	t.Parallel()
	plain, schema, a, b := onTwoWorkers(t)
	ctx := context.Background()
	_, err := plain.Exec(ctx, "ALTER TABLE "+schema+".heads ADD CONSTRAINT refuse_b CHECK (NOT running OR ordering_id <> '"+b+"')")
	require.NoError(t, err)
	// a is the more overdue, so every claim calls a's worker first.
	_, err = plain.Exec(ctx, "UPDATE "+schema+".heads SET run_at = $2 WHERE partition_id = 0 AND ordering_id = $1", a, time.Now().Add(-time.Minute))
	require.NoError(t, err)

	cfg := fastConfig(schema)
	cfg.Handlers = map[string]pgsched.Handler{"*": pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error { return nil })}
	outcomes := watchOutcomes(&cfg)
	startWorkerOn(t, plain, cfg)

	outcomes.waitFor(t, 20*time.Second, func(l *outcomeLog) bool { return l.has(a, "completed") }, "a, claimed by the committed part, ran")
	require.False(t, outcomes.has(b, "completed"), "b's claim is refused")

	_, err = plain.Exec(ctx, "ALTER TABLE "+schema+".heads DROP CONSTRAINT refuse_b")
	require.NoError(t, err)
	outcomes.waitFor(t, 20*time.Second, func(l *outcomeLog) bool { return l.has(b, "completed") }, "b runs once the database takes its claim")
	require.Equal(t, 2, outcomes.count(""), "each task's outcome reported once")
}

// TestCitusRefusedOutcomeKeepsItsBatchmates: a worker's batch of outcomes
// split over two Citus workers, the second part refused: the first
// part's completion, which committed, is reported completed, not fenced,
// and the refused outcome is set aside until the database takes it.
func TestCitusRefusedOutcomeKeepsItsBatchmates(t *testing.T) {
	t.Parallel()
	plain, schema, a, b := onTwoWorkers(t)
	ctx := context.Background()
	_, err := plain.Exec(ctx, "ALTER TABLE "+schema+".dead_tasks ADD CONSTRAINT refuse_b CHECK (ordering_id <> '"+b+"')")
	require.NoError(t, err)

	// a finishes first, b right after: one batch, a's worker first.
	aDone := make(chan struct{})
	cfg := fastConfig(schema)
	cfg.FinishDelay = 300 * time.Millisecond
	cfg.Handlers = map[string]pgsched.Handler{"*": pgsched.HandlerFunc(func(ctx context.Context, j *pgsched.Job) error {
		if j.OrderingID == a {
			close(aDone)
			return nil
		}
		select {
		case <-aDone:
		case <-ctx.Done():
			return ctx.Err()
		}
		return pgsched.Permanent(errors.New("give up"))
	})}
	outcomes := watchOutcomes(&cfg)
	startWorkerOn(t, plain, cfg)

	outcomes.waitFor(t, 20*time.Second, func(l *outcomeLog) bool { return l.has(a, "completed") || l.has(a, "fenced") }, "a's outcome settled")
	require.True(t, outcomes.has(a, "completed"), "a's completion committed with the first part")
	require.False(t, outcomes.has(a, "fenced"))
	require.False(t, outcomes.has(b, "dead"), "b's outcome is refused")

	_, err = plain.Exec(ctx, "ALTER TABLE "+schema+".dead_tasks DROP CONSTRAINT refuse_b")
	require.NoError(t, err)
	outcomes.waitFor(t, 20*time.Second, func(l *outcomeLog) bool { return l.has(b, "dead") }, "b written once the database takes it")
	require.Equal(t, 2, outcomes.count(""), "each outcome reported once")
}
