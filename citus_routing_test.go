package pgsched_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedtype"
)

// citusWorkers returns pools on the Citus workers behind the coordinator
// pool (same user and database).
func citusWorkers(t *testing.T, coordinator *pgxpool.Pool) []*pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	rows, err := coordinator.Query(ctx, "SELECT nodename, nodeport FROM pg_dist_node WHERE groupid > 0 AND noderole = 'primary' ORDER BY groupid")
	require.NoError(t, err)
	type node struct {
		Host string
		Port int
	}
	nodes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[node])
	require.NoError(t, err)
	require.NotEmpty(t, nodes, "the coordinator has workers")
	var out []*pgxpool.Pool
	for _, n := range nodes {
		cfg, err := pgxpool.ParseConfig(os.Getenv(EnvCitusURL))
		require.NoError(t, err)
		cfg.ConnConfig.Host, cfg.ConnConfig.Port = n.Host, uint16(n.Port)
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		out = append(out, pool)
	}
	return out
}

// TestCitusHotPathIsRouted: on Citus no statement that schedules, claims
// or finishes tasks touches more than one shard, and claims, finishes and
// due-partition reads run on the Citus workers, not the coordinator. The
// test drives those paths as a worker does (enqueue in batches spanning
// every partition and one at a time, wait for due partitions, claim,
// finish with completions, retries, deaths and hand-overs of successors)
// on sessions with citus.multi_task_query_log_level = error, so any
// statement Citus plans over several shards fails the call that ran it;
// the workers of the test cluster refuse such statements too
// (scripts/citus-cluster.sh), where the delegated calls run. It then
// checks that the delegated calls reached the workers and that the
// coordinator ran none of their statements, and lists from
// citus_stat_statements which task-table statements the coordinator (the
// enqueue path) had Citus run whole on one worker (a partition key
// recorded) and which it split into routed steps.
func TestCitusHotPathIsRouted(t *testing.T) {
	t.Parallel()
	plain, schema := citusSchema(t, 8)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(os.Getenv(EnvCitusURL))
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["citus.multi_task_query_log_level"] = "error"
	cfg.ConnConfig.RuntimeParams["pg_stat_statements.track"] = "all"
	cfg.ConnConfig.RuntimeParams["citus.stat_statements_track"] = "all"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	// The check can fail: a statement over every partition is refused, on
	// the coordinator and on the workers.
	_, err = pool.Exec(ctx, "SELECT count(*) FROM "+schema+".heads")
	require.ErrorContains(t, err, "multi-task query")
	workers := citusWorkers(t, plain)
	for _, w := range workers {
		_, err = w.Exec(ctx, "SELECT count(*) FROM "+schema+".heads")
		require.ErrorContains(t, err, "multi-task query", "the test cluster's workers refuse multi-shard statements")
	}

	client, err := pgsched.NewClient(pool, pgsched.ClientConfig{Schema: schema})
	require.NoError(t, err)
	st, err := store.NewCitus(schema)
	require.NoError(t, err)
	lease, err := st.NodeRegister(ctx, pool, "routed", "test", time.Minute, "host", 1, false, 0)
	require.NoError(t, err)
	all := []int32{0, 1, 2, 3, 4, 5, 6, 7}

	const ids, per = 40, 5
	now := time.Now()
	scheduleRounds(t, client, ids, per, now)
	for i := range 10 {
		_, err := client.Schedule(ctx, pgsched.Task{OrderingID: fmt.Sprintf("single-%d", i), ScheduledAt: now})
		require.NoError(t, err)
	}
	// A batch of fresh ordering_ids large enough for the new-keys insert,
	// and a task earlier than an idle head, which settle_heads swaps in
	// (the head goes back to the backlog): their INSERTs run on the
	// coordinator too.
	const fresh = 120
	var batch []pgsched.Task
	for i := range fresh {
		batch = append(batch, pgsched.Task{OrderingID: fmt.Sprintf("fresh-%d", i), ScheduledAt: now})
	}
	_, err = client.ScheduleMany(ctx, batch)
	require.NoError(t, err)
	for _, at := range []time.Time{now.Add(50 * time.Millisecond), now} {
		_, err := client.Schedule(ctx, pgsched.Task{OrderingID: "swap", ScheduledAt: at})
		require.NoError(t, err)
	}
	var headAt time.Time
	require.NoError(t, plain.QueryRow(ctx, "SELECT scheduled_at FROM "+schema+".heads WHERE ordering_id = 'swap'").Scan(&headAt))
	require.WithinDuration(t, now, headAt, time.Millisecond, "the earlier task became the head")

	// Claim and finish until nothing is left: u-key 1 is retried once,
	// u-key 3 of every fifth ordering_id dies, the rest complete; each
	// finish hands successors over, which are finished in turn.
	retried := map[string]bool{}
	var died int
	outcome := func(c store.Claimed) store.Outcome {
		o := store.Outcome{Partition: c.Partition, OrderingID: c.OrderingID, ID: c.ID, ClaimedAt: c.ClaimedAt, Outcome: pgschedtype.OutcomeCompleted}
		key := c.OrderingID + "/" + c.UniquenessKey
		n, _ := strconv.Atoi(strings.TrimPrefix(c.OrderingID, "o-"))
		switch {
		case c.UniquenessKey == "1" && !retried[key]:
			retried[key] = true
			o.Outcome, o.Error = pgschedtype.OutcomeRetry, "once more"
		case c.UniquenessKey == "3" && strings.HasPrefix(c.OrderingID, "o-") && n%5 == 0:
			o.Outcome, o.Error = pgschedtype.OutcomeDead, "no"
			died++
		}
		return o
	}
	var finished, handedOver int
	deadline := time.Now().Add(time.Minute)
	for finished < ids*per+10+fresh+2+ids { // the ids tasks with u-key 1 finish twice
		require.True(t, time.Now().Before(deadline), "finished %d", finished)
		_, err := st.NextDue(ctx, pool, all)
		require.NoError(t, err)
		// Small limits, so claims and hand-overs split over both workers
		// must share them.
		claimed, err := st.Claim(ctx, pool, "routed", lease.Epoch, all, 7, 0)
		require.NoError(t, err)
		require.LessOrEqual(t, len(claimed), 7, "a claim split over workers takes at most max tasks")
		for len(claimed) > 0 {
			outs := make([]store.Outcome, len(claimed))
			for i, c := range claimed {
				outs[i] = outcome(c)
			}
			res, err := st.Finish(ctx, pool, "routed", lease.Epoch, outs, store.Handover{Max: 3, Partitions: all, Limit: 1000})
			require.NoError(t, err)
			require.Len(t, res.Applied, len(outs))
			require.LessOrEqual(t, len(res.HandedOver), 3, "a finish split over workers hands over at most Max")
			finished += len(outs)
			handedOver += len(res.HandedOver)
			claimed = res.HandedOver
		}
	}
	require.Positive(t, handedOver, "successors handed over")
	require.Equal(t, ids/5, died)
	var left, dead int
	require.NoError(t, plain.QueryRow(ctx, "SELECT (SELECT count(*) FROM "+schema+".tasks), (SELECT count(*) FROM "+schema+".dead_tasks)").Scan(&left, &dead))
	require.Zero(t, left, "every task finished")
	require.Equal(t, ids/5, dead)
	// Delegated: the workers ran the calls, each as a statement of its own
	// (pg_stat_statements there), and the coordinator ran none of the
	// statements inside them (this pool tracks nested statements).
	for _, fn := range []string{"claim_due_on", "finish_tasks_on", "queue_next_due_on"} {
		var delegated int64
		for _, w := range workers {
			var n int64
			require.NoError(t, w.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements
				WHERE query ~ '^SELECT' AND strpos(query, $1) > 0`, schema+"."+fn+"(").Scan(&n))
			delegated += n
		}
		require.Positive(t, delegated, "%s delegated to the workers", fn)
		t.Logf("%s: %d calls run on the workers", fn, delegated)
	}
	var inside int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements
		WHERE strpos(query, $1 || '.heads') > 0 AND query ~ '(FOR UPDATE SKIP LOCKED|DELETE FROM \S+\.heads|min\(h\.run_at\))'
		  AND query !~ 'CREATE OR REPLACE (FUNCTION|VIEW)'`, schema).Scan(&inside))
	require.Zero(t, inside, "the coordinator ran no claim, finish or due-read statement")

	// What Citus made of the enqueue path on the coordinator.
	type stmt struct {
		Whole bool
		Query string
		Calls int64
	}
	rows, err := pool.Query(ctx, `SELECT partition_key IS NOT NULL, left(regexp_replace(query, '\s+', ' ', 'g'), 90), sum(calls)::bigint
		FROM citus_stat_statements
		WHERE query ~ ('(^|[^a-z_])' || $1 || '\.(heads|backlog|completions|dead_tasks)([^a-z_]|$)')
		GROUP BY 1, 2 ORDER BY 1, 3 DESC`, schema)
	require.NoError(t, err)
	stmts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[stmt])
	require.NoError(t, err)
	var whole int
	for _, s := range stmts {
		if s.Whole {
			whole++
		}
		t.Logf("routed %-5s %6d calls: %s", map[bool]string{true: "whole", false: "split"}[s.Whole], s.Calls, s.Query)
	}
	require.Positive(t, whole, "statements routed whole to one worker")

	// The enqueue's INSERTs reached the workers whole, selecting from the
	// partition's row of partition_anchor, never as rows Citus pulled to
	// the coordinator and sent on (an INSERT from read_intermediate_result,
	// or a COPY, on the worker).
	var pulled, pushed int64
	for _, w := range workers {
		var p, q int64
		require.NoError(t, w.QueryRow(ctx, `SELECT
			coalesce(sum(calls) FILTER (WHERE strpos(query, 'read_intermediate_result') > 0 OR query ~ '^COPY'), 0)::bigint,
			coalesce(sum(calls) FILTER (WHERE strpos(query, 'partition_anchor') > 0), 0)::bigint
			FROM pg_stat_statements WHERE query ~ ('^(INSERT INTO|COPY) ' || $1 || '\.(heads|backlog|completions|dead_tasks)_[0-9]+ ')`,
			schema).Scan(&p, &q))
		pulled += p
		pushed += q
	}
	t.Logf("enqueue INSERTs on the workers: %d routed whole, %d pulled through the coordinator", pushed, pulled)
	require.Positive(t, pushed, "enqueue INSERTs routed whole")
	require.Zero(t, pulled, "no INSERT of task rows pulled through the coordinator")
}

// TestCitusClaimLeavesUnreachedPartitions: a claim over partitions on two
// Citus workers that fills up on the first worker does not call the
// second, and says which partitions it did not reach, so the node keeps
// looking there instead of taking them for dry.
func TestCitusClaimLeavesUnreachedPartitions(t *testing.T) {
	t.Parallel()
	plain, schema := citusSchema(t, 8)
	ctx := context.Background()
	rows, err := plain.Query(ctx, "SELECT partition_id, worker FROM "+schema+".citus_placement ORDER BY partition_id")
	require.NoError(t, err)
	type place struct {
		Partition int32
		Worker    string
	}
	places, err := pgx.CollectRows(rows, pgx.RowToStructByPos[place])
	require.NoError(t, err)
	require.Len(t, places, 8)
	a, b := places[0], places[len(places)-1]
	require.NotEqual(t, a.Worker, b.Worker, "partitions 0 and 7 live on different workers")

	// Two due tasks in partition a, one in partition b.
	client, err := pgsched.NewClient(plain, pgsched.ClientConfig{Schema: schema})
	require.NoError(t, err)
	now := time.Now()
	in := map[int32]int{}
	for i := 0; in[a.Partition] < 2 || in[b.Partition] < 1; i++ {
		id := fmt.Sprint("u-", i)
		p := int32(pgsched.Partition(id, 8))
		if (p == a.Partition && in[p] < 2) || (p == b.Partition && in[p] < 1) {
			_, err := client.Schedule(ctx, pgsched.Task{OrderingID: id, ScheduledAt: now})
			require.NoError(t, err)
			in[p]++
		}
	}
	st, err := store.NewCitus(schema)
	require.NoError(t, err)
	lease, err := st.NodeRegister(ctx, plain, "unreached", "test", time.Minute, "host", 1, false, 0)
	require.NoError(t, err)

	// Most overdue first as the node lists them: a, b, a's neighbour on
	// a's worker. The claim fills up on a's worker.
	next := places[1]
	require.Equal(t, a.Worker, next.Worker, "partitions 0 and 1 share a worker")
	jobs, unreached, err := st.ClaimFrom(ctx, plain, "unreached", lease.Epoch, []int32{a.Partition, b.Partition, next.Partition}, nil, 2, 0)
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	for _, j := range jobs {
		require.EqualValues(t, a.Partition, j.Partition)
	}
	require.Equal(t, []int32{b.Partition}, unreached)

	// Not full: every worker is called, nothing is left unreached.
	jobs, unreached, err = st.ClaimFrom(ctx, plain, "unreached", lease.Epoch, []int32{a.Partition, b.Partition, next.Partition}, nil, 5, 0)
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.EqualValues(t, b.Partition, jobs[0].Partition)
	require.Empty(t, unreached)
}

// TestCitusEnqueuesOnlyOnCoordinator: an enqueue sent to a Citus worker
// node is refused with a clear error and stores nothing, since task ids
// (enqueue order for equal scheduled_at) come from the coordinator's
// sequence; the same enqueue on the coordinator is stored.
func TestCitusEnqueuesOnlyOnCoordinator(t *testing.T) {
	t.Parallel()
	plain, schema := citusSchema(t, 4)
	ctx := context.Background()
	at := time.Now().Add(time.Hour)
	for _, w := range citusWorkers(t, plain) {
		var res string
		err := w.QueryRow(ctx, "SELECT "+schema+".schedule('on-worker', $1)", at).Scan(&res)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.Equal(t, "0A000", pgErr.Code)
		require.Contains(t, pgErr.Message, "enqueue through the Citus coordinator")
	}
	var n int
	require.NoError(t, plain.QueryRow(ctx, "SELECT count(*) FROM "+schema+".tasks WHERE ordering_id = 'on-worker'").Scan(&n))
	require.Zero(t, n, "nothing stored by the refused enqueues")

	var res string
	require.NoError(t, plain.QueryRow(ctx, "SELECT "+schema+".schedule('on-worker', $1)", at).Scan(&res))
	require.Equal(t, "inserted", res)
}
