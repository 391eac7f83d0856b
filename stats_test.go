package pgsched_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
)

// TestCountKindsMatchesTasks: the leader's count per kind
// (pgsched.count_kinds, read through pgsched.kinds) equals what counting
// the task views gives, for pending heads, backlog, running and dead
// tasks, and lists paused kinds with no task.
func TestCountKindsMatchesTasks(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	s := b.db.Schema
	past, future := time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	for i := range 7 {
		o := fmt.Sprintf("a-%d", i)
		b.db.InsertTask(t, pgtest.TaskRow{OrderingID: o, Kind: "alpha", State: "pending", ScheduledAt: past})
		b.db.InsertTask(t, pgtest.TaskRow{OrderingID: o, Kind: "alpha", State: "backlog", ScheduledAt: future})
	}
	b.db.InsertTask(t, pgtest.TaskRow{OrderingID: "b-1", Kind: "beta", State: "running", ScheduledAt: past})
	b.db.InsertTask(t, pgtest.TaskRow{OrderingID: "b-2", Kind: "beta", State: "pending", ScheduledAt: future})
	for i := range 3 {
		b.db.InsertTask(t, pgtest.TaskRow{OrderingID: fmt.Sprintf("d-%d", i), Kind: "beta", State: "dead"})
	}
	b.db.InsertTask(t, pgtest.TaskRow{OrderingID: "c-1", Kind: "alpha", State: "completed"})
	_, err := b.client.PauseKind(ctx, "gamma")
	require.NoError(t, err)

	var kinds int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT "+s+".count_kinds()").Scan(&kinds))
	require.Equal(t, 2, kinds)
	type row struct {
		pending, due, running, dead int64
		paused                      bool
	}
	read := func(q string) map[string]row {
		rows, err := b.db.Pool.Query(ctx, q)
		require.NoError(t, err)
		defer rows.Close()
		out := map[string]row{}
		for rows.Next() {
			var k string
			var r row
			require.NoError(t, rows.Scan(&k, &r.pending, &r.due, &r.running, &r.dead, &r.paused))
			out[k] = r
		}
		require.NoError(t, rows.Err())
		return out
	}
	counted := read("SELECT kind, pending, due, running, dead, paused FROM " + s + ".kinds")
	require.Equal(t, map[string]row{
		"alpha": {pending: 14, due: 7},
		"beta":  {pending: 1, running: 1, dead: 3},
		"gamma": {paused: true},
	}, counted)
	// The same from the views, one aggregate each (plain enough for
	// Citus to plan too).
	live := map[string]row{}
	add := func(q string, set func(r *row, n int64)) {
		rows, err := b.db.Pool.Query(ctx, q)
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var k string
			var n int64
			require.NoError(t, rows.Scan(&k, &n))
			r := live[k]
			set(&r, n)
			live[k] = r
		}
		require.NoError(t, rows.Err())
	}
	add("SELECT kind, sum(pending)::bigint FROM "+s+".pending GROUP BY kind", func(r *row, n int64) { r.pending = n })
	add("SELECT kind, sum(due)::bigint FROM "+s+".pending GROUP BY kind", func(r *row, n int64) { r.due = n })
	add("SELECT kind, count(*) FROM "+s+".running GROUP BY kind", func(r *row, n int64) { r.running = n })
	add("SELECT kind, count(*) FROM "+s+".dead GROUP BY kind", func(r *row, n int64) { r.dead = n })
	add("SELECT kind, 1::bigint FROM "+s+".paused", func(r *row, _ int64) { r.paused = true })
	require.Equal(t, live, counted, "the count equals the views")
	var at time.Time
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT counted_at FROM "+s+".kind_counted").Scan(&at))
	require.WithinDuration(t, time.Now(), at, time.Minute)

	// The wait: alpha's due heads were due a minute before the count (its
	// later backlog is not due), beta's due task is running, not waiting.
	waits := map[string]*float64{}
	rows, err := b.db.Pool.Query(ctx, "SELECT kind, extract(epoch FROM oldest_due_age)::float8 FROM "+s+".kinds")
	require.NoError(t, err)
	for rows.Next() {
		var k string
		var w *float64
		require.NoError(t, rows.Scan(&k, &w))
		waits[k] = w
	}
	require.NoError(t, rows.Err())
	require.NotNil(t, waits["alpha"], "alpha has due tasks")
	require.InDelta(t, at.Sub(past).Seconds(), *waits["alpha"], 0.01, "alpha's oldest due task waited since it was due")
	require.Nil(t, waits["beta"], "a running task is not waiting")
	require.Nil(t, waits["gamma"])

	// A count while another is running (a new leader's, say) skips
	// instead of queueing behind it.
	tx, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	require.NoError(t, tx.QueryRow(ctx, "SELECT "+s+".count_kinds()").Scan(&kinds))
	require.Equal(t, 2, kinds)
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT "+s+".count_kinds()").Scan(&kinds))
	require.Equal(t, -1, kinds, "skipped while the other count holds its lock")
}

// TestThroughputHistory: every outcome a worker records lands in
// pgsched.throughput, none twice: after the worker stops, the minutes add
// up to exactly the completed, retried and dead attempts, and to one
// started first attempt per task with its lateness.
func TestThroughputHistory(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	cfg := fastConfig(b.db.Schema)
	cfg.Retry.MaxAttempts = 3
	cfg.Handlers = map[string]pgsched.Handler{
		"ok": pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error { return nil }),
		"flaky": pgsched.HandlerFunc(func(_ context.Context, j *pgsched.Job) error {
			if j.Attempt < 3 {
				return errors.New("not yet")
			}
			return nil
		}),
		"bad": pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error { return pgsched.Permanent(errors.New("no")) }),
	}
	w := startWorker(t, b.db, cfg)
	var tasks []pgsched.Task
	for i := range 50 {
		tasks = append(tasks, pgsched.Task{OrderingID: fmt.Sprintf("ok-%d", i), ScheduledAt: time.Now(), Kind: "ok"})
	}
	for i := range 5 {
		tasks = append(tasks, pgsched.Task{OrderingID: fmt.Sprintf("flaky-%d", i), ScheduledAt: time.Now(), Kind: "flaky"},
			pgsched.Task{OrderingID: fmt.Sprintf("bad-%d", i), ScheduledAt: time.Now(), Kind: "bad"})
	}
	_, err := b.client.ScheduleMany(ctx, tasks)
	require.NoError(t, err)
	eventually(t, 20*time.Second, func() bool {
		var done, dead int
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM "+b.db.Schema+".completions), (SELECT count(*) FROM "+b.db.Schema+".dead_tasks)").Scan(&done, &dead))
		return done == 55 && dead == 5
	}, "all tasks finished")
	require.NoError(t, w.Stop(ctx))
	var completed, retried, dead, started int64
	var mean, worst float64
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT sum(completed)::bigint, sum(retried)::bigint, sum(dead)::bigint, sum(started)::bigint,
		(sum(lateness_mean_seconds * started) / sum(started))::float8, max(lateness_max_seconds)::float8 FROM `+b.db.Schema+`.throughput`).
		Scan(&completed, &retried, &dead, &started, &mean, &worst))
	require.Equal(t, int64(55), completed)
	require.Equal(t, int64(10), retried, "two retries of each flaky task")
	require.Equal(t, int64(5), dead)
	require.Equal(t, int64(60), started, "first attempts only")
	require.GreaterOrEqual(t, worst, mean)
	require.GreaterOrEqual(t, mean, 0.0)
}
