package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedtype"
)

func limited(id string, at time.Time, uk string) store.NewTask {
	nt := task(id, at, uk)
	nt.Kind = "l"
	return nt
}

// limitedIn is a task of the limited kind in group.
func limitedIn(id, group string, at time.Time) store.NewTask {
	nt := limited(id, at, "")
	nt.GroupKey = group
	return nt
}

// groups counts claimed tasks by group.
func groups(jobs []store.Claimed) map[string]int {
	out := map[string]int{}
	for _, j := range jobs {
		out[j.GroupKey]++
	}
	return out
}

func limitOf(t *testing.T, f Fixture, kind string) store.LimitInfo {
	t.Helper()
	ls, err := f.Store.Limits(ctx, f.Pool)
	require.NoError(t, err)
	for _, l := range ls {
		if l.Kind == kind {
			return l
		}
	}
	t.Fatalf("no limit for kind %q in %+v", kind, ls)
	return store.LimitInfo{}
}

func kinds(jobs []store.Claimed) map[string]int {
	out := map[string]int{}
	for _, j := range jobs {
		out[j.Kind]++
	}
	return out
}

// limitMaxRunning: a kind limited to 2 runs at most 2 however many are
// due and however much room a claim has; its other heads wait parked and
// show in the view; the place a finish frees goes to the kind's next
// parked task at once (handed over), under the limit; every way
// a task stops running (completed, retry, rescue) frees its place; clearing
// the limit lets the rest run as any kind.
func limitMaxRunning(t *testing.T, f Fixture) {
	at := time.Now().Add(-time.Second)
	// o's two tasks are the earliest: the first claim of the kind takes o/1.
	schedule(t, f, limited("l1", at, ""), limited("l2", at, ""), limited("l3", at, ""), limited("l4", at, ""),
		limited("o", at.Add(-2*time.Second), "1"), limited("o", at.Add(-time.Second), "2"), task("k1", at, ""), task("k2", at, ""))
	fresh, err := f.Store.SetLimit(ctx, f.Pool, "l", store.Limit{MaxRunning: 2})
	require.NoError(t, err)
	require.True(t, fresh)
	fresh, err = f.Store.SetLimit(ctx, f.Pool, "l", store.Limit{MaxRunning: 2})
	require.NoError(t, err)
	require.False(t, fresh, "replaced, not new")

	e := node(t, f, "n")
	// As a node claims: the most overdue partitions first.
	due, err := f.Store.NextDue(ctx, f.Pool, all(f))
	require.NoError(t, err)
	parts := make([]int32, len(due))
	for i, d := range due {
		parts[i] = int32(d.Partition)
	}
	jobs, err := f.Store.Claim(ctx, f.Pool, "n", e, parts, 100, 0)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"k": 2, "l": 2}, kinds(jobs), "room for 100, the limit for 2 of l")
	require.Empty(t, claim(t, f, "n", e, 100), "l runs 2 already")
	l := limitOf(t, f, "l")
	require.Equal(t, 2, l.Running)
	require.EqualValues(t, 3, l.Waiting, "5 of l are idle heads, 2 run; o's second is in the backlog")
	due, err = f.Store.NextDue(ctx, f.Pool, all(f))
	require.NoError(t, err)
	require.Empty(t, due, "nothing a claim could take is due")
	_, err = f.Store.CountKinds(ctx, f.Pool)
	require.NoError(t, err)
	counted, err := f.Store.KindsCounted(ctx, f.Pool)
	require.NoError(t, err)
	for _, c := range counted {
		if c.Kind == "l" {
			require.EqualValues(t, 3, c.Held, "the leader's count shows the parked heads")
		} else {
			require.Zero(t, c.Held)
		}
	}

	// A completion frees a place, which the finish hands at once to the
	// kind's next parked task: o/2, o/1's successor, the earliest.
	var first store.Claimed
	for _, j := range jobs {
		if j.OrderingID == "o" {
			first = j
		}
	}
	require.Equal(t, "1", first.UniquenessKey, "o/1 was claimed")
	done, err := f.Store.Finish(ctx, f.Pool, "n", e, []store.Outcome{outcome(first, pgschedtype.OutcomeCompleted)},
		store.Handover{Max: 10, Partitions: all(f), Limit: 16})
	require.NoError(t, err)
	again := done.HandedOver
	if pgtest.Citus() {
		// On Citus the finish runs on the Citus worker, which leaves
		// limited kinds to the coordinator's claims: it tells the node to
		// claim, and the claim takes the freed place.
		require.Empty(t, again)
		require.Positive(t, done.Claimable)
		again = claim(t, f, "n", e, 100)
	}
	require.Len(t, again, 1, "the freed place goes to the next parked task at once")
	require.Equal(t, "o", again[0].OrderingID)
	require.Equal(t, "2", again[0].UniquenessKey)
	require.Equal(t, 2, limitOf(t, f, "l").Running)
	require.Empty(t, claim(t, f, "n", e, 100), "l runs 2 again")

	// A retry frees its place and the task waits again.
	done, err = f.Store.Finish(ctx, f.Pool, "n", e, []store.Outcome{
		{Partition: again[0].Partition, OrderingID: again[0].OrderingID, ID: again[0].ID, ClaimedAt: again[0].ClaimedAt,
			Outcome: pgschedtype.OutcomeRetry, RetryIn: time.Hour, Error: "later"}}, store.Handover{})
	require.NoError(t, err)
	require.Len(t, done.Applied, 1)
	require.Equal(t, 1, limitOf(t, f, "l").Running)

	// A rescue of a dead node's tasks frees their places.
	require.Len(t, claim(t, f, "n", e, 100), 1)
	require.Equal(t, 2, limitOf(t, f, "l").Running)
	expire(t, f, "n", time.Second)
	_, err = f.Store.RescueExpired(ctx, f.Pool, nil)
	require.NoError(t, err)
	require.Zero(t, limitOf(t, f, "l").Running, "the rescued tasks run no more")

	// Cleared: every due task of the kind is claimed as any other.
	was, err := f.Store.ClearLimit(ctx, f.Pool, "l")
	require.NoError(t, err)
	require.True(t, was)
	was, err = f.Store.ClearLimit(ctx, f.Pool, "l")
	require.NoError(t, err)
	require.False(t, was)
	ls, err := f.Store.Limits(ctx, f.Pool)
	require.NoError(t, err)
	require.Empty(t, ls)
	require.Zero(t, count(t, f, "SELECT count(*) FROM {s}.heads WHERE chain < 0 AND NOT running"), "nothing parked")
	dueHeads := count(t, f, "SELECT count(*) FROM {s}.heads WHERE kind = 'l' AND NOT running AND run_at <= now()")
	require.GreaterOrEqual(t, dueHeads, 3, "4 of l are pending, one waits an hour")
	e2 := node(t, f, "n2")
	require.Equal(t, map[string]int{"l": dueHeads, "k": 2}, kinds(claim(t, f, "n2", e2, 100)),
		"every due head of l, and k1, k2 rescued")
}

// limitMaxStarts: a kind limited to 3 starts an hour starts 3, then none
// however many finish; the view counts the window; the due read tells
// when the window lets the next one start.
func limitMaxStarts(t *testing.T, f Fixture) {
	at := time.Now().Add(-time.Second)
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		schedule(t, f, limited(id, at, ""))
	}
	_, err := f.Store.SetLimit(ctx, f.Pool, "l", store.Limit{MaxStarts: 3, Per: time.Hour})
	require.NoError(t, err)
	e := node(t, f, "n")
	jobs := claim(t, f, "n", e, 100)
	require.Len(t, jobs, 3)
	var outs []store.Outcome
	for _, j := range jobs {
		outs = append(outs, outcome(j, pgschedtype.OutcomeCompleted))
	}
	_, err = f.Store.Finish(ctx, f.Pool, "n", e, outs, store.Handover{})
	require.NoError(t, err)
	require.Empty(t, claim(t, f, "n", e, 100), "3 started this hour")
	l := limitOf(t, f, "l")
	require.Equal(t, store.Limit{MaxStarts: 3, Per: time.Hour}, l.Limit)
	require.Equal(t, 3, l.StartedInWindow)
	require.Zero(t, l.Running)
	require.EqualValues(t, 2, l.Waiting)
	due, err := f.Store.NextDue(ctx, f.Pool, all(f))
	require.NoError(t, err)
	require.NotEmpty(t, due)
	require.InDelta(t, time.Hour.Seconds(), due[0].DueIn.Seconds(), 60, "due when the first start leaves the window")
}

// limitBadInput: each bad argument is refused with what is wrong, and
// nothing is written.
func limitBadInput(t *testing.T, f Fixture) {
	for _, c := range []struct {
		kind string
		l    store.Limit
		want string
	}{
		{"", store.Limit{MaxRunning: 1}, "kind is required"},
		{"k", store.Limit{}, "needs max_running, or max_starts with per"},
		{"k", store.Limit{MaxRunning: -1}, "max_running must be at least 1"},
		{"k", store.Limit{MaxStarts: 3}, "max_starts and per go together"},
		{"k", store.Limit{MaxStarts: 20000, Per: time.Second}, "max_starts must be from 1 to 10000"},
		{"k", store.Limit{MaxStarts: 1, Per: -time.Second}, "per must be positive"},
		{"k", store.Limit{MaxStarts: 1, Per: 48 * time.Hour}, "per must be at most a day"},
		{"k", store.Limit{MaxStarts: 3, PerGroup: true}, "max_starts and per go together"},
	} {
		_, err := f.Store.SetLimit(ctx, f.Pool, c.kind, c.l)
		require.ErrorIs(t, err, store.ErrInvalid, "%+v", c)
		if !pgtest.Citus() {
			require.ErrorContains(t, err, c.want)
		}
	}
	_, err := f.Store.ClearLimit(ctx, f.Pool, "")
	require.ErrorIs(t, err, store.ErrInvalid)
	require.Zero(t, count(t, f, "SELECT count(*) FROM {s}.kind_limits"))
}

// limitSweep: heads written the other way around a set_limit or
// clear_limit (here: written straight into the table) are put right by
// the leader's sweep: an idle head of a limited kind is parked, and a
// parked head of a kind without a limit goes back to the claims' index.
func limitSweep(t *testing.T, f Fixture) {
	_, err := f.Store.SetLimit(ctx, f.Pool, "l", store.Limit{MaxRunning: 1})
	require.NoError(t, err)
	at := time.Now().Add(-time.Second)
	f.DB.InsertTask(t, pgtest.TaskRow{OrderingID: "straggler", ScheduledAt: at, Kind: "l", State: "pending"})
	schedule(t, f, task("free", at, ""))
	exec(t, f, "UPDATE "+f.Store.Schema()+".heads SET chain = -1 WHERE ordering_id = 'free'")
	e := node(t, f, "n")
	require.Empty(t, claim(t, f, "n", e, 10), "neither is where claims look for its kind")

	n, err := f.Store.LimitSweep(ctx, f.Pool)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, []string{"free/", "straggler/"}, keys(claim(t, f, "n", e, 10)))
	n, err = f.Store.LimitSweep(ctx, f.Pool)
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to put right")
}

// limitPerGroup: a per-group limit of 1 runs one task of each group at
// once (tasks without a group are a group), whatever the claim's room;
// a group's finish frees that group's place alone; a rescue frees the
// places of the tasks it rescues.
func limitPerGroup(t *testing.T, f Fixture) {
	at := time.Now().Add(-time.Second)
	grouped := func(id, group string) store.NewTask { return limitedIn(id, group, at) }
	schedule(t, f, grouped("a1", "a"), grouped("a2", "a"), grouped("a3", "a"), grouped("b1", "b"), grouped("b2", "b"),
		grouped("n1", ""), grouped("n2", ""))
	_, err := f.Store.SetLimit(ctx, f.Pool, "l", store.Limit{MaxRunning: 1, PerGroup: true})
	require.NoError(t, err)
	require.True(t, limitOf(t, f, "l").Limit.PerGroup)
	e := node(t, f, "n")
	jobs := claim(t, f, "n", e, 100)
	require.Equal(t, map[string]int{"a": 1, "b": 1, "": 1}, groups(jobs), "one of each group")
	require.Empty(t, claim(t, f, "n", e, 100), "each group runs its one")
	require.Equal(t, 3, limitOf(t, f, "l").Running)

	var a store.Claimed
	for _, j := range jobs {
		if j.GroupKey == "a" {
			a = j
		}
	}
	_, err = f.Store.Finish(ctx, f.Pool, "n", e, []store.Outcome{outcome(a, pgschedtype.OutcomeCompleted)}, store.Handover{})
	require.NoError(t, err)
	next := claim(t, f, "n", e, 100)
	require.Equal(t, map[string]int{"a": 1}, groups(next), "a's place freed, not the others'")

	expire(t, f, "n", time.Second)
	_, err = f.Store.RescueExpired(ctx, f.Pool, nil)
	require.NoError(t, err)
	require.Zero(t, limitOf(t, f, "l").Running)
	require.Zero(t, count(t, f, "SELECT coalesce(sum(running), 0) FROM {s}.limit_group_usage"), "every group's place freed")
	e2 := node(t, f, "n2")
	require.Equal(t, map[string]int{"a": 1, "b": 1, "": 1}, groups(claim(t, f, "n2", e2, 100)))
}

// limitPerGroupRate: a rate per group starts up to 2 an hour of each
// group, then none however many finish; the view sums the groups'
// starts; the due read tells when the first group's window lets the next
// one start; a group that has not started yet still starts at once.
func limitPerGroupRate(t *testing.T, f Fixture) {
	at := time.Now().Add(-time.Second)
	grouped := func(id, group string) store.NewTask { return limitedIn(id, group, at) }
	schedule(t, f, grouped("a1", "a"), grouped("a2", "a"), grouped("a3", "a"), grouped("b1", "b"), grouped("b2", "b"),
		grouped("b3", "b"))
	lim := store.Limit{MaxStarts: 2, Per: time.Hour, PerGroup: true}
	_, err := f.Store.SetLimit(ctx, f.Pool, "l", lim)
	require.NoError(t, err)
	e := node(t, f, "n")
	jobs := claim(t, f, "n", e, 100)
	require.Equal(t, map[string]int{"a": 2, "b": 2}, groups(jobs), "two of each group this hour")
	var outs []store.Outcome
	for _, j := range jobs {
		outs = append(outs, outcome(j, pgschedtype.OutcomeCompleted))
	}
	_, err = f.Store.Finish(ctx, f.Pool, "n", e, outs, store.Handover{})
	require.NoError(t, err)
	require.Empty(t, claim(t, f, "n", e, 100), "each group started 2 this hour")
	l := limitOf(t, f, "l")
	require.Equal(t, lim, l.Limit)
	require.Equal(t, 4, l.StartedInWindow, "the groups' starts, summed")
	require.EqualValues(t, 2, l.Waiting)
	due, err := f.Store.NextDue(ctx, f.Pool, all(f))
	require.NoError(t, err)
	require.NotEmpty(t, due)
	require.InDelta(t, time.Hour.Seconds(), due[0].DueIn.Seconds(), 60, "due when a group's first start leaves the window")

	schedule(t, f, grouped("c1", "c"))
	due, err = f.Store.NextDue(ctx, f.Pool, all(f))
	require.NoError(t, err)
	require.NotEmpty(t, due)
	require.Less(t, due[0].DueIn, time.Second, "a new group has room: due now")
	require.Equal(t, map[string]int{"c": 1}, groups(claim(t, f, "n", e, 100)))
}

// groupWeights: a group's weight is set, replaced (the old one returned),
// listed, refused when out of range or for a bad name, and removed by
// weight 1; on Citus too, where it is a reference table's row, read by
// no claim while limits are refused there.
func groupWeights(t *testing.T, f Fixture) {
	was, err := f.Store.SetGroupWeight(ctx, f.Pool, "export", "gold", 3)
	require.NoError(t, err)
	require.Equal(t, 1, was)
	was, err = f.Store.SetGroupWeight(ctx, f.Pool, "export", "gold", 5)
	require.NoError(t, err)
	require.Equal(t, 3, was)
	for _, c := range []struct {
		kind, group string
		weight      int
		want        string
	}{
		{"", "g", 2, "kind is required"},
		{"k", "g", 0, "weight must be from 1 to 1000, got 0"},
		{"k", "g", 1001, "weight must be from 1 to 1000, got 1001"},
		{"k", "g\x01", 2, "group_key contains a control character"},
	} {
		_, err := f.Store.SetGroupWeight(ctx, f.Pool, c.kind, c.group, c.weight)
		require.ErrorIs(t, err, store.ErrInvalid, "%+v", c)
		require.ErrorContains(t, err, c.want)
	}
	ws, err := f.Store.GroupWeights(ctx, f.Pool)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.Equal(t, "export", ws[0].Kind)
	require.Equal(t, "gold", ws[0].GroupKey)
	require.Equal(t, 5, ws[0].Weight)
	require.False(t, ws[0].Limited)
	was, err = f.Store.SetGroupWeight(ctx, f.Pool, "export", "gold", 1)
	require.NoError(t, err)
	require.Equal(t, 5, was)
	ws, err = f.Store.GroupWeights(ctx, f.Pool)
	require.NoError(t, err)
	require.Empty(t, ws)
}
