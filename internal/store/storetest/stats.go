package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/store"
)

// countsAndStats: CountKinds counts every task per kind and state, which
// the kinds read, the pending sum and the last count's time show; stats
// added by nodes sum per minute into the last hour's throughput, and
// minutes older than a day are pruned.
func countsAndStats(t *testing.T, f Fixture) {
	_, ok, err := f.Store.LastCounted(ctx, f.Pool)
	require.NoError(t, err)
	require.False(t, ok, "never counted")
	now := time.Now()
	a := func(id string, at time.Time) store.NewTask {
		nt := task(id, at, "")
		nt.Kind = "a"
		return nt
	}
	schedule(t, f, a("a1", now.Add(-time.Second)), a("a1", now.Add(time.Hour)), a("a2", now.Add(time.Hour)), task("b1", now.Add(-time.Second), ""))
	e := node(t, f, "n")
	require.Equal(t, []string{"a1/", "b1/"}, keys(claim(t, f, "n", e, 10)))
	f.DB.InsertTask(t, pgtest.TaskRow{OrderingID: "c1", Kind: "c", State: "dead"})
	_, err = f.Store.PauseKind(ctx, f.Pool, "idle")
	require.NoError(t, err)

	kinds, err := f.Store.CountKinds(ctx, f.Pool)
	require.NoError(t, err)
	require.Equal(t, 3, kinds, "a, k and c")
	counts, err := f.Store.KindsCounted(ctx, f.Pool)
	require.NoError(t, err)
	byKind := map[string]store.KindCount{}
	for _, c := range counts {
		byKind[c.Kind] = c
	}
	require.Equal(t, int64(2), byKind["a"].Pending, "a1's second and a2 (a1's first and b1 run)")
	require.Zero(t, byKind["a"].Due)
	require.Zero(t, byKind["a"].OldestDueSeconds, "nothing of a is due")
	require.Equal(t, int64(1), byKind["c"].Dead)
	counted, ok, err := f.Store.LastCounted(ctx, f.Pool)
	require.NoError(t, err)
	require.True(t, ok)
	require.WithinDuration(t, counted.DbNow, counted.CountedAt, time.Minute)
	rows, err := f.Store.ConsoleKinds(ctx, f.Pool)
	require.NoError(t, err)
	require.Equal(t, []store.ConsoleKind{
		{Kind: "a", Pending: 2, Due: 0, Running: 1},
		{Kind: "c", Dead: 1},
		{Kind: "idle", Paused: true},
		{Kind: "k", Running: 1},
	}, rows)

	// In one transaction, so in one minute.
	tx, err := f.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	require.NoError(t, f.Store.AddStats(ctx, tx, "n", store.Stats{Completed: 3, Retried: 1, Started: 2, LatenessSum: 1, LatenessMax: 0.75}))
	require.NoError(t, f.Store.AddStats(ctx, tx, "n", store.Stats{Completed: 2, Dead: 1, Started: 2, LatenessSum: 3, LatenessMax: 2}))
	require.NoError(t, f.Store.AddStats(ctx, tx, "m", store.Stats{Completed: 1}))
	require.NoError(t, tx.Commit(ctx))
	exec(t, f, "INSERT INTO "+f.Store.Schema()+".stats_minutes (minute, node_id, completed, retried, dead, started, lateness_sum, lateness_max) "+
		"VALUES (date_trunc('minute', now() - interval '2 days'), 'n', 9, 0, 0, 0, 0, 0)")
	hour, err := f.Store.StatsHour(ctx, f.Pool)
	require.NoError(t, err)
	require.Len(t, hour, 1, "this minute (minutes more than an hour old are not in it)")
	m := hour[0]
	require.Equal(t, [4]int64{6, 1, 1, 4}, [4]int64{m.Completed, m.Retried, m.Dead, m.Started}, "summed over calls and nodes")
	require.InDelta(t, 1.0, m.LatenessMean, 1e-9, "4 s over 4 starts")
	require.InDelta(t, 2.0, m.LatenessMax, 1e-9)
	pruned, err := f.Store.PruneStats(ctx, f.Pool)
	require.NoError(t, err)
	require.Equal(t, int64(1), pruned, "the minute two days old")
	require.Equal(t, 2, count(t, f, "SELECT count(*) FROM {s}.stats_minutes"))
}

// consoleReads: the console's reads show the cluster, the partitions,
// the lateness of the longest-waiting due head, the task lists, a key
// wherever it is, and the dead tasks.
func consoleReads(t *testing.T, f Fixture) {
	dbNow, err := f.Store.ConsoleNow(ctx, f.Pool)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), dbNow, time.Minute)

	r, err := f.Store.NodeRegister(ctx, f.Pool, "a", "console-a", time.Hour, "host-a", 42, false, 0)
	require.NoError(t, err)
	eb := node(t, f, "b")
	_, err = f.Store.LeaderAcquire(ctx, f.Pool, "a", r.Epoch, time.Hour)
	require.NoError(t, err)
	ok, err := f.Store.Assign(ctx, f.Pool, "a", r.Epoch, plan(f, "a", "b"), map[string]string{"a": "b", "b": "a"})
	require.NoError(t, err)
	require.True(t, ok)
	expire(t, f, "b", time.Second)
	nodes, err := f.Store.ConsoleNodes(ctx, f.Pool)
	require.NoError(t, err)
	require.Len(t, nodes, 2)
	na, nb := nodes[0], nodes[1]
	require.Equal(t, [2]string{"a", "b"}, [2]string{na.NodeID, nb.NodeID})
	require.True(t, na.Live && na.Leader && !nb.Live && !nb.Leader)
	require.Equal(t, r.Epoch, na.Epoch)
	require.Equal(t, eb, nb.Epoch)
	require.Equal(t, "b", na.Backup)
	require.Equal(t, []string{"b"}, na.StandingInFor)
	require.Equal(t, "host-a", na.Host)
	require.Equal(t, int32(42), na.Pid)
	require.Len(t, na.Partitions, (f.Partitions+1)/2)
	parts, err := f.Store.ConsolePartitions(ctx, f.Pool)
	require.NoError(t, err)
	require.Len(t, parts, f.Partitions)
	for _, p := range parts {
		require.Equal(t, "a", p.ServedBy, "partition %d: a serves it (b's as stand-in)", p.PartitionID)
		require.Equal(t, p.Owner == "a", p.OwnerLive)
	}

	lateness, err := f.Store.ConsoleLateness(ctx, f.Pool)
	require.NoError(t, err)
	require.Zero(t, lateness, "nothing due")
	late := f.DB.InsertTask(t, pgtest.TaskRow{OrderingID: "late", ScheduledAt: time.Now().Add(-time.Minute), Kind: "x", Payload: `{"p": 1}`, State: "pending"})
	f.DB.InsertTask(t, pgtest.TaskRow{OrderingID: "late", ScheduledAt: time.Now().Add(time.Hour), Kind: "y", State: "backlog"})
	f.DB.InsertTask(t, pgtest.TaskRow{OrderingID: "busy", Kind: "x", State: "running", NodeID: "a", Epoch: r.Epoch, Attempt: 2})
	lateness, err = f.Store.ConsoleLateness(ctx, f.Pool)
	require.NoError(t, err)
	require.InDelta(t, 60, lateness, 30, "the due head waited a minute")

	ids := func(ls []store.Listed) []string {
		var out []string
		for _, l := range ls {
			out = append(out, l.OrderingID+"/"+l.Kind+"/"+l.State)
		}
		return out
	}
	tasks, err := f.Store.ConsoleTasks(ctx, f.Pool, "late", "", "", 10)
	require.NoError(t, err)
	require.Equal(t, []string{"late/x/pending", "late/y/pending"}, ids(tasks), "an ordering_id's tasks in run order")
	tasks, err = f.Store.ConsoleTasks(ctx, f.Pool, "late", "y", "", 10)
	require.NoError(t, err)
	require.Equal(t, []string{"late/y/pending"}, ids(tasks))
	tasks, err = f.Store.ConsoleTasks(ctx, f.Pool, "", "", "running", 10)
	require.NoError(t, err)
	require.Equal(t, []string{"busy/x/running"}, ids(tasks))
	require.Equal(t, "a", tasks[0].NodeID)
	tasks, err = f.Store.ConsoleTasks(ctx, f.Pool, "", "x", "", 10)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"busy/x/running", "late/x/pending"}, ids(tasks))
	tasks, err = f.Store.ConsoleTasks(ctx, f.Pool, "", "", "", 1)
	require.NoError(t, err)
	require.Len(t, tasks, 1, "up to max")

	key := store.Key{OrderingID: "k", ScheduledAt: time.Now().Add(-time.Hour).Truncate(time.Second)}
	f.DB.InsertTask(t, pgtest.TaskRow{OrderingID: key.OrderingID, ScheduledAt: key.ScheduledAt, State: "completed", NodeID: "b", Attempt: 1})
	deadID := f.DB.InsertTask(t, pgtest.TaskRow{OrderingID: key.OrderingID, ScheduledAt: key.ScheduledAt, Kind: "z", Payload: `{"d": 1}`,
		State: "dead", Attempt: 4, LastError: "boom", NodeID: "a"})
	found, err := f.Store.ConsoleTaskKey(ctx, f.Pool, key)
	require.NoError(t, err)
	states := map[string]store.ConsoleKeyRow{}
	for _, row := range found {
		states[row.State] = row
	}
	require.Len(t, states, 2, "the key completed once, and died when enqueued again")
	require.Equal(t, "b", states["completed"].NodeID)
	require.Equal(t, deadID, states["dead"].ID)
	require.Equal(t, "boom", states["dead"].LastError)
	found, err = f.Store.ConsoleTaskKey(ctx, f.Pool, store.Key{OrderingID: "late", ScheduledAt: time.Time{}})
	require.NoError(t, err)
	require.Empty(t, found)
	var lateAt time.Time
	require.NoError(t, f.Pool.QueryRow(ctx, "SELECT scheduled_at FROM "+f.Store.Schema()+".heads WHERE id = $1", late).Scan(&lateAt))
	found, err = f.Store.ConsoleTaskKey(ctx, f.Pool, store.Key{OrderingID: "late", ScheduledAt: lateAt})
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.Equal(t, "pending", found[0].State)
	require.Equal(t, late, found[0].ID)
	require.JSONEq(t, `{"p": 1}`, string(found[0].Payload))

	older := f.DB.InsertTask(t, pgtest.TaskRow{OrderingID: "older", Kind: "q", State: "dead"})
	exec(t, f, "UPDATE "+f.Store.Schema()+".dead_tasks SET died_at = now() - interval '1 hour' WHERE id = $1", older)
	dead, err := f.Store.ConsoleDead(ctx, f.Pool, "", 10)
	require.NoError(t, err)
	require.Len(t, dead, 2)
	require.Equal(t, [2]int64{deadID, older}, [2]int64{dead[0].ID, dead[1].ID}, "newest first")
	dead, err = f.Store.ConsoleDead(ctx, f.Pool, "q", 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, older, dead[0].ID)
	whole, err := f.Store.ConsoleDeadTask(ctx, f.Pool, deadID)
	require.NoError(t, err)
	require.Len(t, whole, 1)
	require.JSONEq(t, `{"d": 1}`, string(whole[0].Payload))
	require.Equal(t, int32(4), whole[0].Attempt)
	whole, err = f.Store.ConsoleDeadTask(ctx, f.Pool, deadID+1000)
	require.NoError(t, err)
	require.Empty(t, whole)
}
