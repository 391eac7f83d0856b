package pgsched_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedtype"
)

// killTask enqueues a task and records it dead, as a worker whose handler
// failed for good would; it returns the dead task's id.
func killTask(t *testing.T, b clientBundle, orderingID, uk string) int64 {
	t.Helper()
	ctx := context.Background()
	_, err := b.client.Schedule(ctx, pgsched.Task{OrderingID: orderingID, ScheduledAt: time.Now(), UniquenessKey: uk, Kind: "k"})
	require.NoError(t, err)
	c, epoch := claimTask(t, b, orderingID)
	res, err := b.store.Finish(ctx, b.db.Pool, "test-"+orderingID, epoch, []store.Outcome{{Partition: c.Partition, OrderingID: orderingID,
		ID: c.ID, ClaimedAt: c.ClaimedAt, Outcome: pgschedtype.OutcomeDead, Error: "gave up"}}, store.Handover{})
	require.NoError(t, err)
	require.Equal(t, []int64{c.ID}, res.Applied)
	// A node that never claims again must not be given partitions.
	require.NoError(t, b.store.NodeDeregister(ctx, b.db.Pool, "test-"+orderingID, epoch))
	return c.ID
}

// TestRetryDead: a dead task retried from SQL and one retried from Go
// each run again exactly once, after the tasks of their ordering_id that
// were pending (due) when they were retried; an unknown id retries nothing.
func TestRetryDead(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	for _, o := range []string{"via-sql", "via-go"} {
		id := killTask(t, b, o, "a")
		for _, uk := range []string{"b", "c"} {
			_, err := b.client.Schedule(ctx, pgsched.Task{OrderingID: o, ScheduledAt: time.Now(), UniquenessKey: uk, Kind: "k"})
			require.NoError(t, err)
		}
		var n int
		var err error
		if o == "via-sql" {
			err = b.db.Pool.QueryRow(ctx, "SELECT "+b.db.Schema+".retry_dead($1)", id).Scan(&n)
		} else {
			n, err = b.client.RetryDead(ctx, id)
		}
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}
	n, err := b.client.RetryDead(ctx, 1<<40)
	require.NoError(t, err)
	require.Zero(t, n, "no such dead task")
	require.Equal(t, 0, countRows(t, b, "dead_tasks"))

	var mu sync.Mutex
	ran := map[string][]string{}
	cfg := fastConfig(b.db.Schema)
	cfg.Handlers = map[string]pgsched.Handler{"k": pgsched.HandlerFunc(func(_ context.Context, j *pgsched.Job) error {
		mu.Lock()
		ran[j.OrderingID] = append(ran[j.OrderingID], j.UniquenessKey)
		mu.Unlock()
		return nil
	})}
	outcomes := watchOutcomes(&cfg)
	startWorker(t, b.db, cfg)
	outcomes.completed(t, 6, 20*time.Second)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string][]string{"via-sql": {"b", "c", "a"}, "via-go": {"b", "c", "a"}}, ran,
		"each retried task ran once, after the tasks that were due before it")
}

// TestRetryDeadBulk: 10,000 dead tasks go back in line in one statement,
// tasks of one ordering_id keeping their order and distinct keys.
func TestRetryDeadBulk(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	s := b.db.Schema
	_, err := b.db.Pool.Exec(ctx, `INSERT INTO `+s+`.dead_tasks (partition_id, id, ordering_id, scheduled_at, uniqueness_key, kind, payload, attempt, last_error)
		SELECT `+s+`.partition_of('bulk-' || (i % 1000), 8), nextval('`+s+`.task_id_seq'), 'bulk-' || (i % 1000),
		       now() - interval '1 day' + i * interval '1 second', '', 'bulk', jsonb_build_object('i', i), 3, 'boom'
		FROM generate_series(1, 10000) AS i`)
	require.NoError(t, err)

	var n int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT "+s+".retry_dead_where(kind => 'bulk')").Scan(&n))
	require.Equal(t, 10000, n)
	require.Equal(t, 0, countRows(t, b, "dead_tasks"))
	require.Equal(t, 10000, countRows(t, b, "tasks"))
	var outOfOrder int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM (
		SELECT (payload->>'i')::int AS i, lag((payload->>'i')::int) OVER (PARTITION BY ordering_id ORDER BY scheduled_at, id) AS prev
		FROM `+s+`.tasks) x WHERE x.prev > x.i`).Scan(&outOfOrder))
	require.Zero(t, outOfOrder, "tasks of one ordering_id keep their order")
	var attempts int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT coalesce(sum(attempt), 0) FROM "+s+".tasks").Scan(&attempts))
	require.Zero(t, attempts, "attempt counts reset")
}

// TestDeleteDead: one by id, several by filter; a filter with nothing set
// is refused from Go and SQL rather than taken as "all".
func TestDeleteDead(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	id := killTask(t, b, "del-1", "")
	killTask(t, b, "del-2", "")
	killTask(t, b, "del-3", "")

	n, err := b.client.DeleteDead(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = b.client.DeleteDead(ctx, id)
	require.NoError(t, err)
	require.Zero(t, n)

	_, err = b.client.DeleteDeadWhere(ctx, pgsched.DeadFilter{})
	require.ErrorIs(t, err, pgsched.ErrInvalidTask)
	require.ErrorContains(t, err, "at least one filter")
	_, err = b.db.Pool.Exec(ctx, "SELECT "+b.db.Schema+".delete_dead_where()")
	require.ErrorContains(t, err, "at least one filter")
	require.Equal(t, 2, countRows(t, b, "dead_tasks"), "nothing deleted by a refused call")

	n, err = b.client.DeleteDeadWhere(ctx, pgsched.DeadFilter{OrderingID: "del-2"})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	var m int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT "+b.db.Schema+".delete_dead_where(died_before => now())").Scan(&m))
	require.Equal(t, 1, m)
	require.Equal(t, 0, countRows(t, b, "dead_tasks"))
}
