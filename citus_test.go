package pgsched_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedmigrate"
)

// EnvCitusURL points the Citus tests at a Citus coordinator with workers
// (make test-citus starts a one-machine cluster: scripts/citus-cluster.sh).
const EnvCitusURL = "PGSCHED_CITUS_URL"

// citusSchema migrates a fresh schema with -citus on the Citus cluster
// and returns a pool on the coordinator.
func citusSchema(t *testing.T, partitions int) (*pgxpool.Pool, string) {
	t.Helper()
	u := os.Getenv(EnvCitusURL)
	if u == "" {
		t.Skipf("%s is not set: the Citus tests need a Citus cluster (make test-citus starts one)", EnvCitusURL)
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, u)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	schema := pgtest.UniqueName(t, "c")
	m, err := pgschedmigrate.New(ctx, pool, pgschedmigrate.Config{Schema: schema, Partitions: partitions, Citus: true})
	require.NoError(t, err)
	require.NoError(t, m.Up(ctx))
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	return pool, schema
}

// scheduleRounds enqueues per rounds of one batch each: round r holds task
// r (uniqueness_key r, due at now + r ms) of ordering_ids o-0 .. o-(ids-1),
// so every batch spans partitions.
func scheduleRounds(t *testing.T, client *pgsched.Client, ids, per int, now time.Time) {
	t.Helper()
	for round := range per {
		var batch []pgsched.Task
		for i := range ids {
			batch = append(batch, pgsched.Task{OrderingID: fmt.Sprintf("o-%d", i), ScheduledAt: now.Add(time.Duration(round) * time.Millisecond),
				UniquenessKey: fmt.Sprint(round)})
		}
		_, err := client.ScheduleMany(context.Background(), batch)
		require.NoError(t, err)
	}
}

// TestCitusDistribution: migrate -citus distributes the task tables by
// partition_id, co-located (and partition_anchor with them, a row per
// partition), with exactly one shard per logical partition, placed on the
// workers in contiguous blocks; every other table is a reference table;
// migrating again changes nothing.
func TestCitusDistribution(t *testing.T) {
	t.Parallel()
	pool, schema := citusSchema(t, 16)
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT c.relname::text, coalesce(d.partmethod::text, 'local'), coalesce(d.colocationid, 0)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_dist_partition d ON d.logicalrelid = c.oid
		WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND NOT c.relispartition`, schema)
	require.NoError(t, err)
	type dist struct {
		method     string
		colocation int
	}
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct {
		name string
		dist
	}, error) {
		var v struct {
			name string
			dist
		}
		err := r.Scan(&v.name, &v.method, &v.colocation)
		return v, err
	})
	require.NoError(t, err)
	byName := map[string]dist{}
	for _, tb := range tables {
		byName[tb.name] = tb.dist
	}
	heads := byName["heads"]
	require.Equal(t, "h", heads.method, "heads is hash-distributed")
	for _, name := range []string{"backlog", "completions", "dead_tasks", "partition_anchor"} {
		require.Equal(t, heads, byName[name], "%s is co-located with heads", name)
	}
	var anchors int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(DISTINCT partition_id) FROM "+schema+".partition_anchor").Scan(&anchors))
	require.Equal(t, 16, anchors, "partition_anchor has a row for every partition")
	for name, d := range byName {
		switch name {
		case "heads", "backlog", "completions", "dead_tasks", "partition_anchor":
		case "goose_db_version", "sql_objects":
			require.Equal(t, "local", d.method, "%s is the migrator's, on the coordinator", name)
		default:
			require.Equal(t, "n", d.method, "%s is a reference table", name)
		}
	}

	// One shard per partition, each partition alone in its shard, and the
	// workers holding contiguous blocks of equal size.
	type placement struct {
		p      int
		shard  int64
		worker string
	}
	rows, err = pool.Query(ctx, "SELECT partition_id, shard_id, worker FROM "+schema+".citus_placement")
	require.NoError(t, err)
	places, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (placement, error) {
		var v placement
		return v, r.Scan(&v.p, &v.shard, &v.worker)
	})
	require.NoError(t, err)
	require.Len(t, places, 16)
	var shards int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = $1::regclass", schema+".heads").Scan(&shards))
	require.Equal(t, 16, shards, "shard count = partition count")
	seen := map[int64]bool{}
	perWorker := map[string][]int{}
	for _, pl := range places {
		require.False(t, seen[pl.shard], "partition %d shares shard %d", pl.p, pl.shard)
		seen[pl.shard] = true
		perWorker[pl.worker] = append(perWorker[pl.worker], pl.p)
	}
	require.Len(t, perWorker, 2, "both workers hold partitions")
	for w, ps := range perWorker {
		sort.Ints(ps)
		require.Len(t, ps, 8, "%s holds half", w)
		require.Equal(t, ps[0]+7, ps[7], "%s holds a contiguous block: %v", w, ps)
	}

	// Rows of a partition land in its shard.
	_, err = pool.Exec(ctx, `INSERT INTO `+schema+`.dead_tasks (partition_id, id, ordering_id, scheduled_at, uniqueness_key, kind, payload, attempt)
		SELECT p, p, 'o', now(), '', 'k', '{}', 1 FROM generate_series(0, 15) AS p`)
	require.NoError(t, err)
	var perShard int
	require.NoError(t, pool.QueryRow(ctx, `SELECT max(n) FROM (SELECT get_shard_id_for_distribution_column($1, partition_id) AS s, count(*) AS n
		FROM `+schema+`.dead_tasks GROUP BY 1) x`, schema+".dead_tasks").Scan(&perShard))
	require.Equal(t, 1, perShard)

	// Migrating again distributes nothing new and keeps the shards.
	m, err := pgschedmigrate.New(ctx, pool, pgschedmigrate.Config{Schema: schema, Citus: true})
	require.NoError(t, err)
	require.NoError(t, m.Up(ctx))
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = $1::regclass", schema+".heads").Scan(&shards))
	require.Equal(t, 16, shards)

	// A schema distributed before partition_anchor existed gets it
	// distributed with the task tables, rows and all, when it migrates up
	// to it (Downs undo the migrations back to before it), and enqueues
	// work on.
	for range 10 {
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE oid = to_regclass($1)", schema+".partition_anchor").Scan(&anchors))
		if anchors == 0 {
			break
		}
		require.NoError(t, m.Down(ctx))
	}
	require.Zero(t, anchors, "Down dropped partition_anchor")
	require.NoError(t, m.Up(ctx))
	var sameGroup bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE logicalrelid = $1::regclass),
			count(DISTINCT colocationid) = 1
		FROM pg_dist_partition WHERE logicalrelid IN ($1::regclass, $2::regclass)`,
		schema+".partition_anchor", schema+".heads").Scan(&anchors, &sameGroup))
	require.Equal(t, 1, anchors, "partition_anchor distributed again")
	require.True(t, sameGroup, "partition_anchor co-located with heads")
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(DISTINCT partition_id) FROM "+schema+".partition_anchor").Scan(&anchors))
	require.Equal(t, 16, anchors)
	client, err := pgsched.NewClient(pool, pgsched.ClientConfig{Schema: schema})
	require.NoError(t, err)
	var batch []pgsched.Task
	for i := range 40 {
		batch = append(batch, pgsched.Task{OrderingID: fmt.Sprint("after-", i), ScheduledAt: time.Now().Add(time.Hour)})
	}
	_, err = client.ScheduleMany(ctx, batch)
	require.NoError(t, err)
	var enqueued int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".heads WHERE ordering_id LIKE 'after-%'").Scan(&enqueued))
	require.Equal(t, 40, enqueued)

	// Every view reads.
	rows, err = pool.Query(ctx, "SELECT table_name FROM information_schema.views WHERE table_schema = $1", schema)
	require.NoError(t, err)
	views, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, views)
	for _, v := range views {
		_, err := pool.Exec(ctx, "SELECT * FROM "+schema+"."+v)
		require.NoError(t, err, "view %s", v)
	}
}

// TestCitusRetention: completion partitions created ahead are distributed
// and co-located as they are attached, and the leader's upkeep drops the
// expired ones, on distributed tables as on one server.
func TestCitusRetention(t *testing.T) {
	t.Parallel()
	pool, schema := citusSchema(t, 4)
	ctx := context.Background()
	partitions := func() []string {
		rows, err := pool.Query(ctx, `SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
			WHERE i.inhparent = $1::regclass ORDER BY 1`, schema+".completions")
		require.NoError(t, err)
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return names
	}
	before := partitions()
	require.Len(t, before, 9, "yesterday, today and seven days ahead")
	// The upkeep as if three weeks had passed: today's partitions expire
	// (retention 7 days), three weeks' ahead are created.
	_, err := pool.Exec(ctx, "SELECT "+schema+".ensure_completion_partitions(now() + interval '21 days', 1)")
	require.NoError(t, err)
	after := partitions()
	require.NotContains(t, after, before[0], "expired partitions dropped")
	newest := after[len(after)-1]
	require.Greater(t, newest, before[len(before)-1], "partitions ahead created")
	var colocated bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = $1::regclass)
		= (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = $2::regclass)`, schema+"."+newest, schema+".heads").Scan(&colocated))
	require.True(t, colocated, "%s is distributed with heads", newest)
	var shards int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = $1::regclass", schema+"."+newest).Scan(&shards))
	require.Equal(t, 4, shards, "one shard per partition")
}

// TestCitusNodesAlignWithShards: worker nodes on the Citus coordinator
// register, elect a leader and split the partitions; with as many nodes
// as Citus workers, each node's partitions live on one worker.
func TestCitusNodesAlignWithShards(t *testing.T) {
	t.Parallel()
	pool, schema := citusSchema(t, 16)
	ctx := context.Background()
	for i := range 2 {
		cfg := fastConfig(schema)
		cfg.NodeID = fmt.Sprintf("n%d", i)
		cfg.Handlers = map[string]pgsched.Handler{"*": pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error { return nil })}
		w, err := pgsched.NewWorker(pool, cfg)
		require.NoError(t, err)
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		require.NoError(t, w.Start(sctx))
		cancel()
		t.Cleanup(func() { _ = w.Stop(context.Background()) })
	}
	var workersPerNode map[string]int
	eventually(t, 20*time.Second, func() bool {
		rows, err := pool.Query(ctx, "SELECT owner_node_id, count(DISTINCT worker) FROM "+schema+".citus_placement WHERE owner_node_id IS NOT NULL GROUP BY 1")
		require.NoError(t, err)
		workersPerNode = map[string]int{}
		for rows.Next() {
			var node string
			var n int
			require.NoError(t, rows.Scan(&node, &n))
			workersPerNode[node] = n
		}
		require.NoError(t, rows.Err())
		var owned int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".partition_owners WHERE node_id IN ('n0', 'n1')").Scan(&owned))
		return len(workersPerNode) == 2 && owned == 16
	}, "both nodes own partitions: %v", workersPerNode)
	require.Equal(t, map[string]int{"n0": 1, "n1": 1}, workersPerNode, "each node's partitions on one Citus worker")
}

// TestCitusDeliversInOrder: on Citus, batches spanning partitions are
// enqueued, and two nodes run every task exactly once, each ordering_id's
// tasks in order and never two at a time, with retries on the way.
func TestCitusDeliversInOrder(t *testing.T) {
	t.Parallel()
	pool, schema := citusSchema(t, 8)
	ctx := context.Background()
	client, err := pgsched.NewClient(pool, pgsched.ClientConfig{Schema: schema})
	require.NoError(t, err)
	var mu sync.Mutex
	runs := map[string][]int{}
	running := map[string]bool{}
	failedOnce := map[string]bool{}
	var overlaps int
	handler := pgsched.HandlerFunc(func(_ context.Context, j *pgsched.Job) error {
		key := fmt.Sprintf("%s/%s", j.OrderingID, j.UniquenessKey)
		mu.Lock()
		if running[j.OrderingID] {
			overlaps++
		}
		running[j.OrderingID] = true
		retry := !failedOnce[key] && len(key)%5 == 0
		failedOnce[key] = true
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		running[j.OrderingID] = false
		if !retry {
			var n int
			_, _ = fmt.Sscanf(j.UniquenessKey, "%d", &n)
			runs[j.OrderingID] = append(runs[j.OrderingID], n)
		}
		mu.Unlock()
		if retry {
			return errors.New("once more")
		}
		return nil
	})
	for i := range 2 {
		cfg := fastConfig(schema)
		cfg.NodeID = fmt.Sprintf("n%d", i)
		cfg.Handlers = map[string]pgsched.Handler{"*": handler}
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		w, err := pgsched.NewWorker(pool, cfg)
		require.NoError(t, err)
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		require.NoError(t, w.Start(sctx))
		cancel()
		t.Cleanup(func() { _ = w.Stop(context.Background()) })
	}
	const ids, per = 20, 15
	// The rounds below may take longer than the default grace window on
	// the one-machine cluster; the times stay those of the first.
	_, err = pool.Exec(ctx, "SELECT "+schema+".configure(grace => '1 hour')")
	require.NoError(t, err)
	now := time.Now()
	scheduleRounds(t, client, ids, per, now)
	done := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, r := range runs {
			n += len(r)
		}
		return n
	}
	var left, runningNow int
	eventually(t, 60*time.Second, func() bool {
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE state = 'running') FROM "+schema+".tasks").Scan(&left, &runningNow))
		return done() >= ids*per
	}, "every task ran: %d ran, %d left (%d running)", done(), left, runningNow)
	mu.Lock()
	defer mu.Unlock()
	require.Zero(t, overlaps, "two tasks of one ordering_id at a time")
	for o, r := range runs {
		want := make([]int, per)
		for i := range want {
			want[i] = i
		}
		require.Equal(t, want, r, "%s: each task once, in order", o)
	}
}

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
		o := store.Outcome{Partition: c.Partition, OrderingID: c.OrderingID, ID: c.ID, ClaimedAt: c.ClaimedAt, Outcome: store.OutcomeCompleted}
		key := c.OrderingID + "/" + c.UniquenessKey
		n, _ := strconv.Atoi(strings.TrimPrefix(c.OrderingID, "o-"))
		switch {
		case c.UniquenessKey == "1" && !retried[key]:
			retried[key] = true
			o.Outcome, o.Error = store.OutcomeRetry, "once more"
		case c.UniquenessKey == "3" && strings.HasPrefix(c.OrderingID, "o-") && n%5 == 0:
			o.Outcome, o.Error = store.OutcomeDead, "no"
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
	jobs, unreached, err := st.ClaimFrom(ctx, plain, "unreached", lease.Epoch, []int32{a.Partition, b.Partition, next.Partition}, 2, 0)
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	for _, j := range jobs {
		require.EqualValues(t, a.Partition, j.Partition)
	}
	require.Equal(t, []int32{b.Partition}, unreached)

	// Not full: every worker is called, nothing is left unreached.
	jobs, unreached, err = st.ClaimFrom(ctx, plain, "unreached", lease.Epoch, []int32{a.Partition, b.Partition, next.Partition}, 5, 0)
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
		{Partition: claimed[0].Partition, OrderingID: claimed[0].OrderingID, ID: claimed[0].ID, ClaimedAt: claimed[0].ClaimedAt, Outcome: store.OutcomeCompleted},
		{Partition: claimed[1].Partition, OrderingID: claimed[1].OrderingID, ID: claimed[1].ID, ClaimedAt: claimed[1].ClaimedAt, Outcome: store.OutcomeDead, Error: "give up"},
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
