package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedtype"
)

func prioTask(id string, at time.Time, uk string, priority int32, group string) store.NewTask {
	nt := task(id, at, uk)
	nt.Priority, nt.GroupKey = priority, group
	return nt
}

// claimByPriority: a claim takes due heads of a higher priority first,
// from every partition given, before it moves to a lower one; negative
// priorities come after the default. Heads of a priority above 0 are
// also found in the served partitions the caller did not list as due;
// others only where listed. The claimed task carries its priority and
// group. The first and the last partition: on Citus, two workers.
func claimByPriority(t *testing.T, f Fixture) {
	at := time.Now().Add(-time.Second)
	last := f.Partitions - 1
	p1a, p1b, p2, p3 := idIn(f, 1, "p1a-"), idIn(f, 1, "p1b-"), idIn(f, last, "p2-"), idIn(f, 3, "p3-")
	pz := idIn(f, last, "pz-")
	p3zero, p3neg := idIn(f, 3, "p3zero-"), idIn(f, 3, "p3neg-")
	schedule(t, f,
		prioTask(p1a, at.Add(-3*time.Second), "", -5, ""), // the oldest, the lowest
		prioTask(p1b, at.Add(-2*time.Second), "", 0, ""),
		prioTask(p2, at, "", 10, "tenant-2"),
		prioTask(pz, at, "", 0, ""),
		prioTask(p3, at, "", 3, ""), // in a partition not listed as due
	)
	require.Equal(t, 3, count(t, f, "SELECT count(*) FROM {s}.priority_levels WHERE priority IN (-5, 3, 10)"),
		"the non-zero priorities in use are recorded")
	e := node(t, f, "n")
	due := []int32{1, int32(last)}
	served := []int32{1, int32(last), 3}
	var order []string
	for range 6 {
		jobs, _, err := f.Store.ClaimFrom(ctx, f.Pool, "n", e, due, served, 1, 0)
		require.NoError(t, err)
		if len(jobs) == 0 {
			break
		}
		require.Len(t, jobs, 1)
		order = append(order, fmt.Sprint(jobs[0].OrderingID, "@", jobs[0].Priority))
		if jobs[0].OrderingID == p2 {
			require.Equal(t, "tenant-2", jobs[0].GroupKey)
		}
	}
	require.Equal(t, []string{p2 + "@10", p3 + "@3", p1b + "@0", pz + "@0", p1a + "@-5"}, order)

	schedule(t, f, task(p3zero, at, ""))
	jobs, _, err := f.Store.ClaimFrom(ctx, f.Pool, "n", e, due, served, 10, 0)
	require.NoError(t, err)
	require.Empty(t, jobs, "a priority-0 head only where the caller looks for due ones")
	due2, err := f.Store.NextDue(ctx, f.Pool, []int32{3})
	require.NoError(t, err)
	require.Len(t, due2, 1, "the due read sees it")

	schedule(t, f, prioTask(p3neg, at, "", -5, ""))
	due2, err = f.Store.NextDue(ctx, f.Pool, []int32{3})
	require.NoError(t, err)
	require.Len(t, due2, 1)
	jobs, _, err = f.Store.ClaimFrom(ctx, f.Pool, "n", e, []int32{3}, nil, 10, 0)
	require.NoError(t, err)
	require.Equal(t, []string{p3neg + "/", p3zero + "/"}, keys(jobs))
	require.Equal(t, p3zero, jobs[0].OrderingID, "0 before -5")
}

// priorityWithinOrderingID: within one ordering_id order wins. A
// high-priority task behind a low one waits for it, and a successor is
// handed over only when no priority above its own is in use.
func priorityWithinOrderingID(t *testing.T, f Fixture) {
	at := time.Now().Add(-time.Second)
	schedule(t, f,
		prioTask("o", at, "1", 0, ""), prioTask("o", at.Add(time.Millisecond), "2", 10, ""),
		prioTask("q", at, "1", 0, ""), prioTask("q", at.Add(time.Millisecond), "2", 0, ""),
		prioTask("x", at, "", 5, ""))
	e := node(t, f, "n")
	jobs := claim(t, f, "n", e, 1)
	require.Equal(t, []string{"x/"}, keys(jobs), "the highest head; o's 10 waits behind o's first")
	jobs = claim(t, f, "n", e, 10)
	require.Equal(t, []string{"o/1", "q/1"}, keys(jobs))
	var outs []store.Outcome
	for _, j := range jobs {
		outs = append(outs, outcome(j, pgschedtype.OutcomeCompleted))
	}
	done, err := f.Store.Finish(ctx, f.Pool, "n", e, outs, store.Handover{Max: 2, Partitions: all(f), Limit: 16})
	require.NoError(t, err)
	require.Equal(t, []string{"o/2"}, keys(done.HandedOver), "o's successor has the highest priority in use; q's waits for a claim")
	require.Equal(t, int32(10), done.HandedOver[0].Priority)
	require.Equal(t, 1, done.Claimable)
	require.Equal(t, []string{"q/2"}, keys(claim(t, f, "n", e, 10)))
}

// priorityOverwriteAndDead: overwriting a pending task, head or behind
// one, changes its priority and group; both stay with a task that dies
// and come back when it is retried.
func priorityOverwriteAndDead(t *testing.T, f Fixture) {
	at := time.Now().Add(-time.Second)
	schedule(t, f, task("o", at, "1"), task("o", at.Add(time.Millisecond), "2"))
	require.Equal(t, []string{"updated", "updated"},
		schedule(t, f, prioTask("o", at, "1", 7, "g1"), prioTask("o", at.Add(time.Millisecond), "2", -2, "g2")))
	listed, err := f.Store.ListTasks(ctx, f.Pool, store.TaskFilter{OrderingID: "o", Limit: 10})
	require.NoError(t, err)
	require.Len(t, listed, 2)
	require.Equal(t, [2]any{int32(7), "g1"}, [2]any{listed[0].Priority, listed[0].GroupKey})
	require.Equal(t, [2]any{int32(-2), "g2"}, [2]any{listed[1].Priority, listed[1].GroupKey})
	require.Equal(t, []string{"updated"}, schedule(t, f, task("o", at, "1")), "back to the defaults")
	listed, err = f.Store.ListTasks(ctx, f.Pool, store.TaskFilter{OrderingID: "o", Limit: 1})
	require.NoError(t, err)
	require.Equal(t, [2]any{int32(0), ""}, [2]any{listed[0].Priority, listed[0].GroupKey})

	e := node(t, f, "n")
	jobs := claim(t, f, "n", e, 10)
	require.Equal(t, []string{"o/1"}, keys(jobs))
	_, err = f.Store.Finish(ctx, f.Pool, "n", e, []store.Outcome{outcome(jobs[0], pgschedtype.OutcomeCompleted)}, store.Handover{})
	require.NoError(t, err)
	jobs = claim(t, f, "n", e, 10)
	require.Len(t, jobs, 1)
	require.Equal(t, [2]any{int32(-2), "g2"}, [2]any{jobs[0].Priority, jobs[0].GroupKey}, "promoted with its own")
	dead := outcome(jobs[0], pgschedtype.OutcomeDead)
	dead.Error = "no hope"
	_, err = f.Store.Finish(ctx, f.Pool, "n", e, []store.Outcome{dead}, store.Handover{})
	require.NoError(t, err)
	require.Equal(t, 1, count(t, f, "SELECT count(*) FROM {s}.dead WHERE priority = -2 AND group_key = 'g2'"))
	var id int64
	require.NoError(t, f.Pool.QueryRow(ctx, "SELECT id FROM "+f.Store.Schema()+".dead_tasks").Scan(&id))
	n, err := f.Store.RetryDead(ctx, f.Pool, id)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	listed, err = f.Store.ListTasks(ctx, f.Pool, store.TaskFilter{OrderingID: "o", Limit: 10})
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.Equal(t, [2]any{int32(-2), "g2"}, [2]any{listed[0].Priority, listed[0].GroupKey}, "retried with its own")
}
