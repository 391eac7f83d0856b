package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedtype"
)

// cancelRunning: a request to cancel a running task is recorded once and
// listed until the task is out of line; a pending or unknown task cannot
// be asked.
func cancelRunning(t *testing.T, f Fixture) {
	at := time.Now().Add(-time.Second)
	schedule(t, f, task("run", at, ""), task("wait", time.Now().Add(time.Hour), ""))
	e := node(t, f, "n")
	jobs := claim(t, f, "n", e, 10)
	require.Len(t, jobs, 1)
	fresh, err := f.Store.CancelRunning(ctx, f.Pool, "run", jobs[0].ScheduledAt, "")
	require.NoError(t, err)
	require.True(t, fresh)
	fresh, err = f.Store.CancelRunning(ctx, f.Pool, "run", jobs[0].ScheduledAt, "")
	require.NoError(t, err)
	require.False(t, fresh, "asked before")
	_, err = f.Store.CancelRunning(ctx, f.Pool, "wait", time.Now().Add(time.Hour), "")
	require.ErrorIs(t, err, store.ErrNotFound, "a pending task is not running")
	_, err = f.Store.CancelRunning(ctx, f.Pool, "nobody", at, "")
	require.ErrorIs(t, err, store.ErrNotFound)

	ids, err := f.Store.CancelRequests(ctx, f.Pool)
	require.NoError(t, err)
	require.Equal(t, []int64{jobs[0].ID}, ids)
	pruned, err := f.Store.PruneCancelRequests(ctx, f.Pool)
	require.NoError(t, err)
	require.Zero(t, pruned, "the task still runs")
	o := outcome(jobs[0], pgschedtype.OutcomeDead)
	o.Error = "cancelled"
	_, err = f.Store.Finish(ctx, f.Pool, "n", e, []store.Outcome{o}, store.Handover{})
	require.NoError(t, err)
	pruned, err = f.Store.PruneCancelRequests(ctx, f.Pool)
	require.NoError(t, err)
	require.Equal(t, 1, pruned, "the task is dead: its request goes")
	ids, err = f.Store.CancelRequests(ctx, f.Pool)
	require.NoError(t, err)
	require.Empty(t, ids)
}

// deadRetryAndDelete: a dead task retried is enqueued again (a new task,
// due now, same ordering_id, key, kind and payload, attempt 0) and leaves
// the dead; deleted, it is gone; the bulk forms act on what every filter
// given selects, and refuse to act with none.
func deadRetryAndDelete(t *testing.T, f Fixture) {
	dead := func(id, kind string) int64 {
		return f.DB.InsertTask(t, pgtest.TaskRow{OrderingID: id, UniquenessKey: "k-" + id, Kind: kind, Payload: `{"id": "` + id + `"}`,
			State: "dead", Attempt: 3, LastError: "boom"})
	}
	one := dead("one", "x")
	gone := dead("gone", "x")
	for i := range 3 {
		dead(fmt.Sprint("y-", i), "y")
	}
	dead("z", "z")

	n, err := f.Store.RetryDead(ctx, f.Pool, one)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = f.Store.RetryDead(ctx, f.Pool, one)
	require.NoError(t, err)
	require.Zero(t, n, "no longer dead")
	listed, err := f.Store.ListTasks(ctx, f.Pool, store.TaskFilter{OrderingID: "one", Limit: 10})
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.Equal(t, "k-one", listed[0].UniquenessKey)
	require.Equal(t, "x", listed[0].Kind)
	require.JSONEq(t, `{"id": "one"}`, string(listed[0].Payload))
	require.Zero(t, listed[0].Attempt)
	require.WithinDuration(t, time.Now(), listed[0].RunAt, time.Minute, "due now")

	n, err = f.Store.DeleteDead(ctx, f.Pool, gone)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = f.Store.DeleteDead(ctx, f.Pool, gone)
	require.NoError(t, err)
	require.Zero(t, n)

	_, err = f.Store.RetryDeadWhere(ctx, f.Pool, store.DeadFilter{})
	require.ErrorIs(t, err, store.ErrInvalid, "no filter: refused")
	_, err = f.Store.DeleteDeadWhere(ctx, f.Pool, store.DeadFilter{})
	require.ErrorIs(t, err, store.ErrInvalid)
	n, err = f.Store.RetryDeadWhere(ctx, f.Pool, store.DeadFilter{Kind: "y", DiedBefore: time.Now().Add(-time.Hour)})
	require.NoError(t, err)
	require.Zero(t, n, "every filter must match: none died an hour ago")
	n, err = f.Store.RetryDeadWhere(ctx, f.Pool, store.DeadFilter{Kind: "y", OrderingID: "y-1"})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = f.Store.DeleteDeadWhere(ctx, f.Pool, store.DeadFilter{Kind: "y", DiedAfter: time.Now().Add(-time.Hour)})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, 1, count(t, f, "SELECT count(*) FROM {s}.dead_tasks"), "z is left")
	n, err = f.Store.RetryDeadWhere(ctx, f.Pool, store.DeadFilter{DiedBefore: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.Equal(t, 1, n, "died_before alone selects every dead task")
	require.Equal(t, 3, count(t, f, "SELECT count(*) FROM {s}.tasks"), "one, y-1 and z are pending again")
}

// listen returns a connection listening on channel and a function that
// waits for its next notification.
func listen(t *testing.T, f Fixture, channel string) func() string {
	t.Helper()
	c, err := f.Pool.Acquire(ctx)
	require.NoError(t, err)
	conn := c.Hijack()
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize())
	require.NoError(t, err)
	return func() string {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, pgtest.Patience(10*time.Second))
		defer cancel()
		n, err := conn.WaitForNotification(wctx)
		require.NoError(t, err, "a notification on %s", channel)
		return n.Payload
	}
}

// notifications: each channel is the schema's own, and the statements
// that wake nodes notify on it: NotifyDue, NotifyCluster and a new plan,
// a pause, a cancel request (with the task's id).
func notifications(t *testing.T, f Fixture) {
	s := f.Store.Schema()
	for _, ch := range []string{f.Store.NotifyChannel(), f.Store.AssignChannel(), f.Store.PauseChannel(), f.Store.CancelChannel()} {
		require.True(t, strings.HasPrefix(ch, s+"."), "%s is the schema's own", ch)
	}
	due, assign := listen(t, f, f.Store.NotifyChannel()), listen(t, f, f.Store.AssignChannel())
	pause, cancel := listen(t, f, f.Store.PauseChannel()), listen(t, f, f.Store.CancelChannel())
	require.NoError(t, f.Store.NotifyDue(ctx, f.Pool))
	due()
	require.NoError(t, f.Store.NotifyCluster(ctx, f.Pool))
	assign()
	e := node(t, f, "n")
	_, err := f.Store.LeaderAcquire(ctx, f.Pool, "n", e, time.Minute)
	require.NoError(t, err)
	assign() // a new leader
	ok, err := f.Store.Assign(ctx, f.Pool, "n", e, plan(f, "n"), nil)
	require.NoError(t, err)
	require.True(t, ok)
	assign() // a new plan
	_, err = f.Store.PauseKind(ctx, f.Pool, "k")
	require.NoError(t, err)
	require.Equal(t, "k", pause())
	schedule(t, f, task("a", time.Now().Add(-time.Second), ""))
	jobs := claim(t, f, "n", e, 1)
	require.Empty(t, jobs, "k is paused")
	_, err = f.Store.ResumeKind(ctx, f.Pool, "k")
	require.NoError(t, err)
	require.Equal(t, "k", pause())
	jobs = claim(t, f, "n", e, 1)
	require.Len(t, jobs, 1)
	_, err = f.Store.CancelRunning(ctx, f.Pool, "a", jobs[0].ScheduledAt, "")
	require.NoError(t, err)
	require.Equal(t, fmt.Sprint(jobs[0].ID), cancel())
}
