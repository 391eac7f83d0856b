package pgsched_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
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
	// As many Downs as there are migrations after it, and some.
	for range 30 {
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
