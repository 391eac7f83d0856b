package pgsched_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
)

// TestCancelRunningInAnotherProcess: a task runs on a worker process; an
// operator cancels it from here. The handler's context is cancelled at
// once, on the request's NOTIFY (the node's maintenance round, which would
// also find it, is ten minutes away), with ErrTaskCancelled as its cause,
// the task is recorded dead with the reason, and it never runs again.
func TestCancelRunningInAnotherProcess(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	createExecLog(t, b.db)
	c := startChild(t, b.db, "cx-1", 0, 4, 5*time.Second, "CHILD_MAINTENANCE=10m")

	at := time.Now()
	key := pgsched.Key{OrderingID: "long", ScheduledAt: at}
	_, err := b.client.ScheduleMany(ctx, []pgsched.Task{
		{OrderingID: "long", ScheduledAt: at, Kind: "probe", Payload: json.RawMessage(`{"db_sleep": 60}`)},
		{OrderingID: "long", ScheduledAt: at.Add(time.Millisecond), UniquenessKey: "next", Kind: "next"},
	})
	require.NoError(t, err)
	eventually(t, 20*time.Second, func() bool { return countRows(t, b, "execlog") == 1 }, "the task started")

	_, err = b.client.CancelRunning(ctx, pgsched.Key{OrderingID: "long", ScheduledAt: at.Add(time.Millisecond), UniquenessKey: "next"})
	require.ErrorIs(t, err, pgsched.ErrNotFound, "a pending task is not running")

	asked := time.Now()
	fresh, err := b.client.CancelRunning(ctx, key)
	require.NoError(t, err)
	require.True(t, fresh)
	c.waitLine(t, "CANCELLED long", 10*time.Second)
	t.Logf("handler context cancelled %s after the request committed", time.Since(asked))

	eventually(t, 10*time.Second, func() bool { return countRows(t, b, "dead_tasks") == 1 }, "recorded as dead")
	msg, _ := lastDeadError(t, b, "long")
	require.True(t, strings.HasPrefix(msg, "pgsched: task cancelled by an operator (pgsched.cancel_running)"), msg)
	eventually(t, 10*time.Second, func() bool { return countRows(t, b, "completions") == 1 }, "the next task of its ordering_id ran")
	var runs int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+b.db.Schema+".execlog WHERE uk = ''").Scan(&runs))
	require.Equal(t, 1, runs, "never run again")
	_, err = b.client.CancelRunning(ctx, key)
	require.ErrorIs(t, err, pgsched.ErrNotFound, "no longer running")
}

func lastDeadError(t *testing.T, b clientBundle, orderingID string) (string, bool) {
	t.Helper()
	var msg string
	err := b.db.Pool.QueryRow(context.Background(),
		"SELECT last_error FROM "+b.db.Schema+".dead_tasks WHERE ordering_id = $1", orderingID).Scan(&msg)
	return msg, err == nil
}

// TestCancelQueuedTask: a task claimed but still waiting for a handler
// (prefetched) is recorded cancelled without starting; from SQL, a second
// request for it reports false.
func TestCancelQueuedTask(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	release := make(chan struct{})
	started := make(chan string, 10)
	cfg := fastConfig(b.db.Schema)
	cfg.Concurrency = 1
	cfg.Prefetch = 5
	cfg.Handlers = map[string]pgsched.Handler{"*": pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error {
		started <- job.OrderingID
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})}
	outcomes := watchOutcomes(&cfg)
	startWorker(t, b.db, cfg)
	at := time.Now()
	_, err := b.client.ScheduleMany(ctx, []pgsched.Task{
		{OrderingID: "a", ScheduledAt: at}, {OrderingID: "b", ScheduledAt: at},
	})
	require.NoError(t, err)
	first := <-started
	waiting := "a"
	if first == "a" {
		waiting = "b"
	}
	eventually(t, 10*time.Second, func() bool {
		tasks, err := b.client.ListTasks(ctx, pgsched.TaskFilter{OrderingID: waiting, State: pgsched.StateRunning})
		require.NoError(t, err)
		return len(tasks) == 1
	}, "the second task is claimed while the first runs")

	var fresh bool
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT "+b.db.Schema+".cancel_running($1, $2, '')", waiting, at).Scan(&fresh))
	require.True(t, fresh)
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT "+b.db.Schema+".cancel_running($1, $2, '')", waiting, at).Scan(&fresh))
	require.False(t, fresh, "already asked")
	outcomes.waitFor(t, 10*time.Second, func(l *outcomeLog) bool { return l.has(waiting, "dead") }, "recorded cancelled")
	close(release)
	outcomes.completed(t, 1, 10*time.Second)
	select {
	case id := <-started:
		t.Fatalf("%s started after it was cancelled", id)
	default:
	}
	msg, _ := lastDeadError(t, b, waiting)
	require.Equal(t, "pgsched: task cancelled by an operator (pgsched.cancel_running)", msg)
}

// TestCancelRunningFromSQL: cancel_running asks once per task and refuses
// a key that is pending, waiting behind its head, or unknown, with the
// same error the Go client maps to ErrNotFound. Rows come from the row
// factory: no node runs here.
func TestCancelRunningFromSQL(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	at := time.Now().Truncate(time.Microsecond)
	id := b.db.InsertTask(t, pgtest.TaskRow{OrderingID: "r", ScheduledAt: at, State: "running", Attempt: 1})
	b.db.InsertTask(t, pgtest.TaskRow{OrderingID: "r", ScheduledAt: at.Add(time.Second), State: "backlog"})
	b.db.InsertTask(t, pgtest.TaskRow{OrderingID: "p", ScheduledAt: at, State: "pending"})

	for i, want := range []bool{true, false} {
		ok, err := b.client.CancelRunning(ctx, pgsched.Key{OrderingID: "r", ScheduledAt: at})
		require.NoError(t, err)
		require.Equal(t, want, ok, "call %d", i)
	}
	var got int64
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT task_id FROM "+b.db.Schema+".cancel_requests").Scan(&got))
	require.Equal(t, id, got)
	for _, k := range []pgsched.Key{
		{OrderingID: "r", ScheduledAt: at.Add(time.Second)},
		{OrderingID: "p", ScheduledAt: at},
		{OrderingID: "nobody", ScheduledAt: at},
	} {
		_, err := b.client.CancelRunning(ctx, k)
		require.ErrorIs(t, err, pgsched.ErrNotFound, "%+v", k)
		_, err = b.db.Pool.Exec(ctx, "SELECT "+b.db.Schema+".cancel_running($1, $2, $3)", k.OrderingID, k.ScheduledAt, k.UniquenessKey)
		require.ErrorContains(t, err, "is not running", "%+v", k)
	}
}
