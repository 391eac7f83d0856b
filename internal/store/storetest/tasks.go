package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedtype"
)

// claimInPartitionOrder: a claim goes through the partitions in the order
// given (the caller's most overdue first), only those, and within one
// takes the most overdue heads first.
func claimInPartitionOrder(t *testing.T, f Fixture) {
	now := time.Now()
	a1, b := idIn(f, 1, "a"), idIn(f, 2, "b")
	a2 := idIn(f, 1, a1+"-")
	schedule(t, f, task(a1, now.Add(-time.Second), ""), task(a2, now.Add(-2*time.Second), ""), task(b, now.Add(-3*time.Second), ""))
	e := node(t, f, "n")
	jobs, _, err := f.Store.ClaimFrom(ctx, f.Pool, "n", e, []int32{1, 2}, nil, 1, 0)
	require.NoError(t, err)
	require.Equal(t, []string{a2 + "/"}, keys(jobs), "partition 1 first, though 2's head is older; in it, the most overdue")
	jobs, _, err = f.Store.ClaimFrom(ctx, f.Pool, "n", e, []int32{1}, nil, 10, 0)
	require.NoError(t, err)
	require.Equal(t, []string{a1 + "/"}, keys(jobs), "only the partitions given")
	jobs, unreached, err := f.Store.ClaimFrom(ctx, f.Pool, "n", e, []int32{2, 1}, nil, 10, 0)
	require.NoError(t, err)
	require.Equal(t, []string{b + "/"}, keys(jobs))
	require.Empty(t, unreached, "a claim short of max reaches every partition")
}

// claimNeedsUnexpiredLease: a registered node whose lease ran out claims
// nothing, whatever its epoch.
func claimNeedsUnexpiredLease(t *testing.T, f Fixture) {
	schedule(t, f, task("a", time.Now().Add(-time.Second), ""))
	e := node(t, f, "n")
	expire(t, f, "n", time.Second)
	require.Empty(t, claim(t, f, "n", e, 10), "an expired lease claims nothing")
	exec(t, f, "UPDATE "+f.Store.Schema()+".nodes SET lease_expires_at = now() + interval '1 hour' WHERE node_id = 'n'")
	require.Len(t, claim(t, f, "n", e, 10), 1)
}

// claimSkipsPausedKinds: a paused kind's heads are neither claimed nor
// handed over, whether pause_kind marked them or they were written after
// it (claims filter by kind; pause_sweep marks them later); resuming lets
// them go.
func claimSkipsPausedKinds(t *testing.T, f Fixture) {
	at := time.Now().Add(-time.Second)
	pausedTask := func(id string, at time.Time, uk string) store.NewTask {
		nt := task(id, at, uk)
		nt.Kind = "p"
		return nt
	}
	schedule(t, f, pausedTask("p1", at, ""), task("k1", at, ""), task("o", at, "1"), pausedTask("o", at.Add(time.Millisecond), "2"))
	fresh, err := f.Store.PauseKind(ctx, f.Pool, "p")
	require.NoError(t, err)
	require.True(t, fresh)
	fresh, err = f.Store.PauseKind(ctx, f.Pool, "p")
	require.NoError(t, err)
	require.False(t, fresh, "already paused")
	paused, err := f.Store.PausedKinds(ctx, f.Pool)
	require.NoError(t, err)
	require.Len(t, paused, 1)
	require.Equal(t, "p", paused[0].Kind)
	require.WithinDuration(t, time.Now(), paused[0].PausedAt, time.Minute)
	// A head of the kind written after the pause, not marked.
	f.DB.InsertTask(t, pgtest.TaskRow{OrderingID: "p2", ScheduledAt: at, Kind: "p", State: "pending"})

	e := node(t, f, "n")
	jobs := claim(t, f, "n", e, 10)
	require.Equal(t, []string{"k1/", "o/1"}, keys(jobs), "no task of the paused kind")
	var outs []store.Outcome
	for _, j := range jobs {
		outs = append(outs, outcome(j, pgschedtype.OutcomeCompleted))
	}
	done, err := f.Store.Finish(ctx, f.Pool, "n", e, outs, store.Handover{Max: 10, Partitions: all(f), Limit: 16})
	require.NoError(t, err)
	require.Empty(t, done.HandedOver, "o's successor is of the paused kind: not handed over")
	require.Empty(t, claim(t, f, "n", e, 10))

	require.Zero(t, count(t, f, "SELECT count(*) FROM {s}.heads WHERE ordering_id = 'p2' AND paused"))
	marked, err := f.Store.PauseSweep(ctx, f.Pool)
	require.NoError(t, err)
	require.GreaterOrEqual(t, marked, 1, "the sweep marks what was written since the pause")
	require.Equal(t, 3, count(t, f, "SELECT count(*) FROM {s}.heads WHERE paused"), "every idle head of the kind is marked: p1, p2, o/2")

	was, err := f.Store.ResumeKind(ctx, f.Pool, "p")
	require.NoError(t, err)
	require.True(t, was)
	was, err = f.Store.ResumeKind(ctx, f.Pool, "p")
	require.NoError(t, err)
	require.False(t, was, "not paused any more")
	require.Zero(t, count(t, f, "SELECT count(*) FROM {s}.heads WHERE paused"))
	require.Equal(t, []string{"o/2", "p1/", "p2/"}, keys(claim(t, f, "n", e, 10)), "resumed: claimed")
	n, err := f.Store.PauseSweep(ctx, f.Pool)
	require.NoError(t, err)
	require.Zero(t, n, "nothing paused, nothing marked")
}

// finishWritesEachOutcome: a completion leaves a tombstone with the node
// and attempt, a dead task a dead_tasks row with its error, and either one
// puts the ordering_id's next task at its head; a retry keeps the task
// with its error, later, at the same attempt count.
func finishWritesEachOutcome(t *testing.T, f Fixture) {
	at := time.Now().Add(-time.Second)
	schedule(t, f, task("c", at, "1"), task("c", at.Add(time.Millisecond), "2"), task("d", at, "1"), task("d", at.Add(time.Millisecond), "2"),
		task("r", at, ""))
	e := node(t, f, "n")
	jobs := claim(t, f, "n", e, 10)
	require.Equal(t, []string{"c/1", "d/1", "r/"}, keys(jobs))
	var outs []store.Outcome
	for _, j := range jobs {
		o := outcome(j, pgschedtype.OutcomeCompleted)
		switch j.OrderingID {
		case "d":
			o.Outcome, o.Error = pgschedtype.OutcomeDead, "no hope"
		case "r":
			o.Outcome, o.Error, o.RetryIn = pgschedtype.OutcomeRetry, "later", time.Hour
		}
		outs = append(outs, o)
	}
	done, err := f.Store.Finish(ctx, f.Pool, "n", e, outs, store.Handover{})
	require.NoError(t, err)
	require.Len(t, done.Applied, 3)
	require.Equal(t, 3, done.Claimable, "the successors of c and d wait for a claim, and r for its retry")

	require.Equal(t, 1, count(t, f, "SELECT count(*) FROM {s}.completions WHERE ordering_id = 'c' AND uniqueness_key = '1' AND node_id = 'n' AND attempt = 1"))
	require.Equal(t, 1, count(t, f, "SELECT count(*) FROM {s}.dead_tasks WHERE ordering_id = 'd' AND uniqueness_key = '1' AND node_id = 'n' AND attempt = 1 AND last_error = 'no hope'"))
	require.Zero(t, count(t, f, "SELECT count(*) FROM {s}.completions WHERE ordering_id IN ('d', 'r')"), "only the completed task is a completion")
	listed, err := f.Store.ListTasks(ctx, f.Pool, store.TaskFilter{Limit: 10})
	require.NoError(t, err)
	got := map[string]store.Listed{}
	for _, l := range listed {
		got[l.OrderingID+"/"+l.UniquenessKey] = l
	}
	require.Len(t, got, 3)
	require.Equal(t, "pending", got["c/2"].State)
	require.Equal(t, "pending", got["d/2"].State)
	require.Equal(t, "pending", got["r/"].State)
	require.Equal(t, 1, got["r/"].Attempt)
	require.Equal(t, "later", got["r/"].LastError)
	require.Equal(t, []string{"c/2", "d/2"}, keys(claim(t, f, "n", e, 10)), "the successors are the heads now")
}

// finishAfterRescueIsFenced: once a task went back (its node's lease ran
// out) and another node claimed it, the first node's outcome changes
// nothing, and the second node's is recorded.
func finishAfterRescueIsFenced(t *testing.T, f Fixture) {
	e1 := node(t, f, "n1")
	f.DB.InsertTask(t, pgtest.TaskRow{OrderingID: "a", State: "running", NodeID: "n1", Epoch: e1, Attempt: 1})
	first := held(t, f, "n1", e1)
	expire(t, f, "n1", time.Second)
	n, err := f.Store.RescueExpired(ctx, f.Pool, []string{"n1"})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	e2 := node(t, f, "n2")
	jobs := claim(t, f, "n2", e2, 10)
	require.Len(t, jobs, 1)
	require.Equal(t, 2, jobs[0].Attempt, "claimed again as the next attempt")

	// n1 comes back under a new term and reports its old run.
	e1b := node(t, f, "n1")
	for _, epoch := range []int64{e1, e1b} {
		done, err := f.Store.Finish(ctx, f.Pool, "n1", epoch, []store.Outcome{heldOutcome(first, pgschedtype.OutcomeCompleted)}, store.Handover{})
		require.NoError(t, err)
		require.Empty(t, done.Applied, "n1's outcome under epoch %d is fenced", epoch)
	}
	require.Zero(t, count(t, f, "SELECT count(*) FROM {s}.completions"))
	done, err := f.Store.Finish(ctx, f.Pool, "n2", e2, []store.Outcome{outcome(jobs[0], pgschedtype.OutcomeCompleted)}, store.Handover{})
	require.NoError(t, err)
	require.Equal(t, []int64{jobs[0].ID}, done.Applied)
	require.Equal(t, 1, count(t, f, "SELECT count(*) FROM {s}.completions WHERE node_id = 'n2' AND attempt = 2"))
}

// rescueLeavesLeavingNode: a node that is leaving (a graceful stop) keeps
// its lease and drains its running tasks itself, so a rescue naming it,
// as its stand-in's does, gives none of them back: they would run twice
// at once. Once its lease has run out, the same rescue gives them back.
func rescueLeavesLeavingNode(t *testing.T, f Fixture) {
	e := node(t, f, "leaving")
	f.DB.InsertTask(t, pgtest.TaskRow{OrderingID: "draining", State: "running", NodeID: "leaving", Epoch: e, Attempt: 1})
	exec(t, f, "UPDATE "+f.Store.Schema()+".nodes SET leaving = true WHERE node_id = 'leaving'")
	n, err := f.Store.RescueExpired(ctx, f.Pool, []string{"leaving"})
	require.NoError(t, err)
	require.Zero(t, n, "a leaving node's running task stays with it")
	require.Equal(t, "draining", held(t, f, "leaving", e).OrderingID)
	expire(t, f, "leaving", time.Second)
	n, err = f.Store.RescueExpired(ctx, f.Pool, []string{"leaving"})
	require.NoError(t, err)
	require.Equal(t, 1, n, "once its lease ran out, it goes back")
}

// rescueOrphaned: a running task whose node has no row (deregistered,
// depleted) is left by RescueExpired, which goes by the node rows, and
// given back by RescueOrphaned; a live node's task stays where it is.
func rescueOrphaned(t *testing.T, f Fixture) {
	live := node(t, f, "live")
	f.DB.InsertTask(t, pgtest.TaskRow{OrderingID: "kept", State: "running", NodeID: "live", Epoch: live, Attempt: 1})
	f.DB.InsertTask(t, pgtest.TaskRow{OrderingID: "orphan", State: "running", NodeID: "ghost", Epoch: 7, Attempt: 1})
	n, err := f.Store.RescueExpired(ctx, f.Pool, nil)
	require.NoError(t, err)
	require.Zero(t, n, "no node row says its lease expired")
	n, err = f.Store.RescueOrphaned(ctx, f.Pool)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	listed, err := f.Store.ListTasks(ctx, f.Pool, store.TaskFilter{OrderingID: "orphan", Limit: 10})
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.Equal(t, "pending", listed[0].State)
	require.Contains(t, listed[0].LastError, "node ghost (epoch 7) lost its lease")
	require.Equal(t, "kept", held(t, f, "live", live).OrderingID, "the live node's task still runs there")
	require.Equal(t, []string{"orphan/"}, keys(claim(t, f, "live", live, 10)), "and the orphan runs again")
}

// cancelPending: a pending head or backlog task is removed and the
// ordering_id's next task moves up; a running or unknown key is refused.
func cancelPending(t *testing.T, f Fixture) {
	at := time.Now().Add(time.Hour)
	schedule(t, f, task("o", at, "1"), task("o", at.Add(time.Second), "2"), task("o", at.Add(2*time.Second), "3"))
	require.NoError(t, f.Store.Cancel(ctx, f.Pool, "o", at.Add(time.Second), "2"), "a backlog task")
	require.NoError(t, f.Store.Cancel(ctx, f.Pool, "o", at, "1"), "the head")
	listed, err := f.Store.ListTasks(ctx, f.Pool, store.TaskFilter{OrderingID: "o", Limit: 10})
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.Equal(t, "3", listed[0].UniquenessKey)
	require.Equal(t, 1, count(t, f, "SELECT count(*) FROM {s}.heads WHERE ordering_id = 'o' AND uniqueness_key = '3'"), "the last one is the head")
	require.ErrorIs(t, f.Store.Cancel(ctx, f.Pool, "o", at, "1"), store.ErrNotFound)

	schedule(t, f, task("run", time.Now().Add(-time.Second), ""))
	e := node(t, f, "n")
	jobs := claim(t, f, "n", e, 10)
	require.Len(t, jobs, 1)
	require.ErrorIs(t, f.Store.Cancel(ctx, f.Pool, "run", jobs[0].ScheduledAt, ""), store.ErrRunning)
	require.Equal(t, "run", held(t, f, "n", e).OrderingID, "still running")
}

// reschedule: a pending task moves to its new time and place in its
// ordering_id's order; a taken key, a time before the grace window, a
// running or unknown task are refused.
func reschedule(t *testing.T, f Fixture) {
	at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	schedule(t, f, task("o", at, "a"), task("o", at.Add(time.Minute), "b"))
	// b moves before a: it becomes the head, due now.
	now := time.Now()
	require.NoError(t, f.Store.Reschedule(ctx, f.Pool, "o", at.Add(time.Minute), "b", now))
	e := node(t, f, "n")
	jobs := claim(t, f, "n", e, 10)
	require.Equal(t, []string{"o/b"}, keys(jobs), "the rescheduled task is the head, due")
	require.WithinDuration(t, now, jobs[0].ScheduledAt, time.Millisecond)
	require.ErrorIs(t, f.Store.Reschedule(ctx, f.Pool, "o", jobs[0].ScheduledAt, "b", at.Add(time.Hour)), store.ErrRunning)

	schedule(t, f, task("p", at, "x"), task("p", at.Add(time.Minute), "x"))
	require.ErrorIs(t, f.Store.Reschedule(ctx, f.Pool, "p", at, "x", at.Add(time.Minute)), store.ErrConflict, "the new key exists")
	require.ErrorIs(t, f.Store.Reschedule(ctx, f.Pool, "p", at, "x", time.Now().Add(-time.Hour)), store.ErrInPast)
	require.ErrorIs(t, f.Store.Reschedule(ctx, f.Pool, "p", at.Add(time.Second), "x", at.Add(5*time.Minute)), store.ErrNotFound)
	require.NoError(t, f.Store.Reschedule(ctx, f.Pool, "p", at, "x", at.Add(2*time.Minute)))
	listed, err := f.Store.ListTasks(ctx, f.Pool, store.TaskFilter{OrderingID: "p", Limit: 10})
	require.NoError(t, err)
	require.Len(t, listed, 2)
	require.True(t, listed[0].ScheduledAt.Equal(at.Add(time.Minute)), "the other one is first now")
	require.True(t, listed[1].ScheduledAt.Equal(at.Add(2*time.Minute)))
	require.True(t, listed[1].RunAt.Equal(at.Add(2*time.Minute)), "and runs at its new time")
}

// listTasksFilters: ListTasks selects by kind, ordering_id, state and due
// time, pages in key order after a key, and stops at its limit.
func listTasksFilters(t *testing.T, f Fixture) {
	now := time.Now()
	var tasks []store.NewTask
	for i := range 6 {
		nt := task(fmt.Sprint("id-", i), now.Add(time.Duration(i)*time.Hour-time.Second), "")
		if i%2 == 1 {
			nt.Kind = "odd"
		}
		tasks = append(tasks, nt)
	}
	tasks = append(tasks, task("id-0", now.Add(time.Hour), "later"))
	schedule(t, f, tasks...)
	e := node(t, f, "n")
	first := claim(t, f, "n", e, 10)
	require.Len(t, first, 1, "id-0's first, the only due one")

	list := func(tf store.TaskFilter) []string {
		t.Helper()
		if tf.Limit == 0 {
			tf.Limit = 100
		}
		got, err := f.Store.ListTasks(ctx, f.Pool, tf)
		require.NoError(t, err)
		var out []string
		for _, l := range got {
			out = append(out, l.OrderingID+"/"+l.UniquenessKey+"/"+l.State)
		}
		return out
	}
	require.Equal(t, []string{"id-0//running", "id-0/later/pending", "id-1//pending", "id-2//pending", "id-3//pending",
		"id-4//pending", "id-5//pending"}, list(store.TaskFilter{}), "every task, in key order")
	require.Equal(t, []string{"id-1//pending", "id-3//pending", "id-5//pending"}, list(store.TaskFilter{Kind: "odd"}))
	require.Equal(t, []string{"id-0//running", "id-0/later/pending"}, list(store.TaskFilter{OrderingID: "id-0"}))
	require.Equal(t, []string{"id-0//running"}, list(store.TaskFilter{State: "running"}))
	require.Equal(t, []string{"id-0//running", "id-0/later/pending", "id-1//pending"},
		list(store.TaskFilter{DueBy: now.Add(90 * time.Minute)}))
	require.Equal(t, []string{"id-0/later/pending", "id-1//pending"}, list(store.TaskFilter{Limit: 2,
		After: store.Key{OrderingID: "id-0", ScheduledAt: first[0].ScheduledAt}}), "after a key, up to the limit")
	running, err := f.Store.ListTasks(ctx, f.Pool, store.TaskFilter{State: "running", Limit: 1})
	require.NoError(t, err)
	require.Equal(t, "n", running[0].NodeID)
	require.Equal(t, 1, running[0].Attempt)
}

// schemaAndSettings: the schema's version is its newest migration, and the
// settings are those the migration wrote, with the database's clock.
func schemaAndSettings(t *testing.T, f Fixture) {
	v, err := f.Store.SchemaVersion(ctx, f.Pool)
	require.NoError(t, err)
	require.Equal(t, count(t, f, "SELECT max(version_id) FROM {s}.goose_db_version"), int(v))
	require.Positive(t, v)
	s, err := f.Store.Settings(ctx, f.Pool)
	require.NoError(t, err)
	require.Equal(t, f.Partitions, s.PartitionCount)
	require.Equal(t, 5*time.Second, s.Grace)
	require.Equal(t, 7*24*time.Hour, s.Retention)
	require.Positive(t, s.MaxPayloadBytes)
	require.WithinDuration(t, time.Now(), s.DBNow, time.Minute)
	require.Equal(t, f.DB.Schema, f.Store.Schema())
}

// completionPartitions: the days ahead get their completion partitions,
// and a day past the retention is dropped with its tombstones.
func completionPartitions(t *testing.T, f Fixture) {
	s := f.Store.Schema()
	var old time.Time
	require.NoError(t, f.Pool.QueryRow(ctx, "SELECT now() - completion_retention - interval '2 days' FROM "+s+".settings").Scan(&old))
	exec(t, f, "SELECT "+s+".ensure_completion_partitions($1, 0)", old)
	exec(t, f, `INSERT INTO `+s+`.completions (partition_id, ordering_id, scheduled_at, uniqueness_key, kind, attempt, node_id, completed_at)
		VALUES (0, 'old', $1, '', 'k', 1, 'n', $1)`, old)
	table := func(day time.Time) string { return "completions_" + day.UTC().Format("20060102") }
	exists := func(name string) bool {
		return count(t, f, "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2",
			s, name) == 1
	}
	require.True(t, exists(table(old)))

	dropped, err := f.Store.EnsureCompletionPartitions(ctx, f.Pool, 10)
	require.NoError(t, err)
	require.Equal(t, 1, dropped)
	require.False(t, exists(table(old)), "the expired day is dropped")
	require.Zero(t, count(t, f, "SELECT count(*) FROM {s}.completions WHERE ordering_id = 'old'"))
	settings, err := f.Store.Settings(ctx, f.Pool)
	require.NoError(t, err)
	for d := range 11 {
		require.True(t, exists(table(settings.DBNow.AddDate(0, 0, d))), "day %d ahead", d)
	}
	dropped, err = f.Store.EnsureCompletionPartitions(ctx, f.Pool, 10)
	require.NoError(t, err)
	require.Zero(t, dropped, "again: nothing more to drop")
}
