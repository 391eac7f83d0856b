package pgschedmigrate_test

import (
	"context"
	"fmt"
	"strings"
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

// snapshot reads every task of the schema, in whatever state, as text
// rows: what a Down and Up must leave as it was. Columns later migrations
// add (a head's paused and tick marks) are not read: going below the
// migration that added one drops it, and the Up adds it back at its
// default.
func snapshot(t *testing.T, pool *pgxpool.Pool, schema string) []string {
	t.Helper()
	var out []string
	for _, q := range []string{
		`SELECT format('%s %s %s %s %s %s %s %s %s %s %s %s %s %s', state, partition_id, id, ordering_id, scheduled_at, uniqueness_key,
			kind, payload, run_at, attempt, last_error, node_id, epoch, claimed_at) FROM ` + schema + `.tasks`,
		`SELECT format('dead %s %s %s %s %s %s %s %s %s %s %s', partition_id, id, ordering_id, scheduled_at, uniqueness_key,
			kind, payload, attempt, last_error, node_id, died_at) FROM ` + schema + `.dead_tasks`,
		`SELECT format('completed %s %s %s %s %s %s %s %s', partition_id, ordering_id, scheduled_at, uniqueness_key, kind,
			attempt, node_id, completed_at) FROM ` + schema + `.completions`,
	} {
		rows, err := pool.Query(context.Background(), q+" ORDER BY 1")
		require.NoError(t, err)
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		out = append(out, got...)
	}
	return out
}

// TestDownUpKeepsTasks: on one server, a schema at the newest version
// with tasks in every state (pending, behind another, running on a node
// that is gone, dead, completed) and a recurring schedule goes down to
// each earlier version in turn and up again. After each round trip every
// task is as it was; the schedule is there unless the round went below
// the migration that made its table. Then a worker runs the pending tasks
// and, once it gives it back, the orphaned running one; enqueueing works.
func TestDownUpKeepsTasks(t *testing.T) {
	if pgtest.Citus() {
		t.Skip("on Citus, TestCitusDistribute takes a distributed schema down and up")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Patience(5*time.Minute))
	defer cancel()
	schema := pgtest.UniqueName(t, "downup")
	pool, err := pgxpool.New(ctx, pgtest.ServerURL(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	t.Cleanup(func() {
		_, _ = pgtest.AdminPool(t).Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	})
	m, err := pgschedmigrate.New(ctx, pool, pgschedmigrate.Config{Schema: schema, Partitions: 8})
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.Up(ctx))
	status, err := m.Status(ctx)
	require.NoError(t, err)
	version := func() int64 {
		t.Helper()
		st, err := m.Status(ctx)
		require.NoError(t, err)
		var v int64
		for _, s := range st {
			if s.Applied {
				v = max(v, s.Version)
			}
		}
		return v
	}
	head := version()
	require.Equal(t, status[len(status)-1].Version, head)
	var recurringSince int64
	for _, s := range status {
		if recurringSince == 0 && strings.Contains(s.Name, "recurring") {
			recurringSince = s.Version
		}
	}
	require.Positive(t, recurringSince)

	client, err := pgsched.NewClient(pool, pgsched.ClientConfig{Schema: schema})
	require.NoError(t, err)
	now := time.Now()
	_, err = client.ScheduleMany(ctx, []pgsched.Task{
		{OrderingID: "alone", ScheduledAt: now, Kind: "work", Payload: []byte(`{"n": 1}`)},
		{OrderingID: "queue", ScheduledAt: now, UniquenessKey: "1", Kind: "work"},
		{OrderingID: "queue", ScheduledAt: now.Add(time.Millisecond), UniquenessKey: "2", Kind: "work"},
		{OrderingID: "later", ScheduledAt: now.Add(24 * time.Hour), Kind: "work"},
	})
	require.NoError(t, err)
	db := &pgtest.DB{URL: pgtest.ServerURL(t), Schema: schema, Pool: pool}
	db.InsertTask(t, pgtest.TaskRow{OrderingID: "orphan", Kind: "work", State: "running", NodeID: "gone", Epoch: 3, Attempt: 1})
	db.InsertTask(t, pgtest.TaskRow{OrderingID: "died", Kind: "work", State: "dead", Attempt: 5, LastError: "boom", NodeID: "gone"})
	db.InsertTask(t, pgtest.TaskRow{OrderingID: "done", Kind: "work", State: "completed", Attempt: 1, NodeID: "gone"})
	_, err = client.UpsertRecurring(ctx, pgsched.Recurring{Name: "yearly", Spec: "0 3 1 1 *", Kind: "work"})
	require.NoError(t, err)
	want := snapshot(t, pool, schema)
	require.Len(t, want, 7)

	// Down to 1, the core tables: below them no task could stay. Below
	// version 3 there is no sql_objects table, which Down's dropObjects
	// must not touch (it once did, and the failed statement aborted its
	// transaction).
	for target := head - 1; target >= 1; target-- {
		for v := head; v > target; v-- {
			require.NoError(t, m.Down(ctx), "down from %d", v)
		}
		require.Equal(t, target, version(), "down to %d", target)
		require.NoError(t, m.Up(ctx), "up from %d", target)
		require.Equal(t, head, version())
		require.Equal(t, want, snapshot(t, pool, schema), "every task as it was after going down to %d and up", target)
		list, err := client.ListRecurring(ctx)
		require.NoError(t, err)
		if target >= recurringSince {
			require.Len(t, list, 1, "the schedule stays above %d", recurringSince)
		} else {
			require.Empty(t, list, "below %d its table went", recurringSince)
		}
	}

	var mu sync.Mutex
	ran := map[string]int{}
	w, err := pgsched.NewWorker(pool, pgsched.WorkerConfig{
		Schema: schema, NodeID: "after-downup", LeaseTTL: pgtest.Patience(time.Second),
		PollInterval: 100 * time.Millisecond, MaintenanceInterval: 100 * time.Millisecond, ClusterInterval: 100 * time.Millisecond,
		Handlers: map[string]pgsched.Handler{"work": pgsched.HandlerFunc(func(_ context.Context, job *pgsched.Job) error {
			mu.Lock()
			defer mu.Unlock()
			ran[fmt.Sprint(job.OrderingID, "/", job.UniquenessKey, "/", job.Attempt)]++
			return nil
		})},
	})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	_, err = client.Schedule(ctx, pgsched.Task{OrderingID: "fresh", ScheduledAt: time.Now(), Kind: "work"})
	require.NoError(t, err)
	expected := map[string]int{"alone//1": 1, "queue/1/1": 1, "queue/2/1": 1, "orphan//2": 1, "fresh//1": 1}
	deadline := time.Now().Add(pgtest.Patience(30 * time.Second))
	for {
		var done int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".completions WHERE ordering_id <> 'done'").Scan(&done))
		if done == len(expected) {
			break
		}
		require.True(t, time.Now().Before(deadline), "the worker ran %d of %d tasks after the round trips", done, len(expected))
		wait := time.NewTimer(20 * time.Millisecond) // polling the database; nothing to wait on
		<-wait.C
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, expected, ran, "each due task once, the orphan as its second attempt")
}
