// Package storetest is the suite every store.Store implementation must
// pass: the single-server store on every test run, the Citus store in the
// Citus suite (make test-citus), on a schema distributed as migrate
// -citus does. It tests the store directly, through its interface, so a
// change to one implementation that breaks what the engine relies on
// shows here before any worker runs: which tasks a claim takes, in what
// order an ordering_id's tasks come, which outcomes a stale term may
// write, what a finish hands over, what a node reads as due.
package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/partition"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedtype"
)

// Fixture is a migrated schema of its own and the store under test on it.
type Fixture struct {
	Store store.Store
	Pool  *pgxpool.Pool
	// Partitions is the schema's partition count.
	Partitions int
	// DB is the schema, for writing rows in any state straight into its
	// tables (pgtest.DB.InsertTask) and reading them back.
	DB *pgtest.DB
}

// Run runs the suite; open gives each test a fresh fixture.
func Run(t *testing.T, open func(t *testing.T) Fixture) {
	tests := []struct {
		name string
		fn   func(t *testing.T, f Fixture)
	}{
		{"ScheduleManyResults", scheduleManyResults},
		{"ClaimTakesHeadsOnly", claimTakesHeadsOnly},
		{"ClaimHonoursMaxAndAhead", claimHonoursMaxAndAhead},
		{"ClaimNeedsLiveTerm", claimNeedsLiveTerm},
		{"OrderWithinOrderingID", orderWithinOrderingID},
		{"FinishIsFencedByClaim", finishIsFencedByClaim},
		{"FinishRetryReleaseDead", finishRetryReleaseDead},
		{"FinishHandsOver", finishHandsOver},
		{"ManyPartitions", manyPartitions},
		{"NextDueMostOverdueFirst", nextDueMostOverdueFirst},
		{"HeldByAndRescue", heldByAndRescue},
		// tasks.go
		{"ClaimInPartitionOrder", claimInPartitionOrder},
		{"ClaimNeedsUnexpiredLease", claimNeedsUnexpiredLease},
		{"ClaimSkipsPausedKinds", claimSkipsPausedKinds},
		{"FinishWritesEachOutcome", finishWritesEachOutcome},
		{"FinishAfterRescueIsFenced", finishAfterRescueIsFenced},
		{"RescueOrphaned", rescueOrphaned},
		{"RescueLeavesLeavingNode", rescueLeavesLeavingNode},
		{"CancelPending", cancelPending},
		{"Reschedule", reschedule},
		{"ListTasksFilters", listTasksFilters},
		{"SchemaAndSettings", schemaAndSettings},
		{"CompletionPartitions", completionPartitions},
		// priority.go
		{"ClaimByPriority", claimByPriority},
		{"PriorityWithinOrderingID", priorityWithinOrderingID},
		{"PriorityOverwriteAndDead", priorityOverwriteAndDead},
		// limits.go
		{"LimitMaxRunning", limitMaxRunning},
		{"LimitMaxStarts", limitMaxStarts},
		{"LimitBadInput", limitBadInput},
		{"LimitSweep", limitSweep},
		{"LimitPerGroup", limitPerGroup},
		{"LimitPerGroupRate", limitPerGroupRate},
		{"GroupWeights", groupWeights},
		// cluster.go
		{"NodeTerms", nodeTerms},
		{"LeaderAndPlan", leaderAndPlan},
		{"StandIns", standIns},
		{"Deplete", deplete},
		// operate.go
		{"CancelRunning", cancelRunning},
		{"DeadRetryAndDelete", deadRetryAndDelete},
		{"Notifications", notifications},
		// recurring.go
		{"RecurringDefinitions", recurringDefinitions},
		{"RecurringMaterialize", recurringMaterialize},
		{"RecurringSetAside", recurringSetAside},
		// stats.go
		{"CountsAndStats", countsAndStats},
		{"ConsoleReads", consoleReads},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, open(t))
		})
	}
}

var ctx = context.Background()

// node registers a node with a term of an hour and returns its epoch.
func node(t *testing.T, f Fixture, id string) int64 {
	t.Helper()
	r, err := f.Store.NodeRegister(ctx, f.Pool, id, "storetest-"+id, time.Hour, "host", 1, false, 0)
	require.NoError(t, err)
	require.Empty(t, r.Wait)
	return r.Epoch
}

func all(f Fixture) []int32 {
	parts := make([]int32, f.Partitions)
	for i := range parts {
		parts[i] = int32(i)
	}
	return parts
}

func schedule(t *testing.T, f Fixture, tasks ...store.NewTask) []string {
	t.Helper()
	res, err := f.Store.ScheduleMany(ctx, f.Pool, tasks, false)
	require.NoError(t, err)
	return res
}

func task(id string, at time.Time, uk string) store.NewTask {
	return store.NewTask{OrderingID: id, ScheduledAt: at, UniquenessKey: uk, Kind: "k", Payload: []byte(`{}`)}
}

// outcome is what a handler said of a claimed task.
func outcome(c store.Claimed, what pgschedtype.Outcome) store.Outcome {
	return store.Outcome{Partition: c.Partition, OrderingID: c.OrderingID, ID: c.ID, ClaimedAt: c.ClaimedAt, Outcome: what}
}

func claim(t *testing.T, f Fixture, nodeID string, epoch int64, max int) []store.Claimed {
	t.Helper()
	jobs, err := f.Store.Claim(ctx, f.Pool, nodeID, epoch, all(f), max, 0)
	require.NoError(t, err)
	return jobs
}

func keys(jobs []store.Claimed) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.OrderingID + "/" + j.UniquenessKey
	}
	slices.Sort(out)
	return out
}

func scheduleManyResults(t *testing.T, f Fixture) {
	at := time.Now().Add(-time.Second)
	require.Equal(t, []string{"inserted", "inserted"}, schedule(t, f, task("a", at, "1"), task("a", at, "2")))
	require.Equal(t, []string{"updated"}, schedule(t, f, task("a", at, "2")), "a pending key is overwritten")
	e := node(t, f, "n")
	jobs := claim(t, f, "n", e, 10)
	require.Len(t, jobs, 1)
	_, err := f.Store.ScheduleMany(ctx, f.Pool, []store.NewTask{task("a", at, "1")}, false)
	require.ErrorIs(t, err, store.ErrRunning, "a running key is refused")
	done, err := f.Store.Finish(ctx, f.Pool, "n", e, []store.Outcome{outcome(jobs[0], pgschedtype.OutcomeCompleted)}, store.Handover{})
	require.NoError(t, err)
	require.Equal(t, []int64{jobs[0].ID}, done.Applied)
	require.Equal(t, []string{"already_completed"}, schedule(t, f, task("a", at, "1")), "a completed key never runs again")
	_, err = f.Store.ScheduleMany(ctx, f.Pool, []store.NewTask{task("a", time.Now().Add(-time.Hour), "old")}, false)
	require.ErrorIs(t, err, store.ErrInPast)
}

func claimTakesHeadsOnly(t *testing.T, f Fixture) {
	at := time.Now().Add(-time.Second)
	for i := range 5 {
		schedule(t, f, task("one", at.Add(time.Duration(i)*time.Millisecond), fmt.Sprint(i)))
	}
	schedule(t, f, task("two", at, "0"))
	e := node(t, f, "n")
	require.Equal(t, []string{"one/0", "two/0"}, keys(claim(t, f, "n", e, 100)), "one task per ordering_id: its head")
	require.Empty(t, claim(t, f, "n", e, 100), "a running head is not claimed again, nor is a task behind it")
}

func claimHonoursMaxAndAhead(t *testing.T, f Fixture) {
	now := time.Now()
	for i := range 10 {
		schedule(t, f, task(fmt.Sprint("due-", i), now.Add(-time.Second), ""))
	}
	schedule(t, f, task("soon", now.Add(30*time.Second), ""), task("later", now.Add(time.Hour), ""))
	e := node(t, f, "n")
	require.Len(t, claim(t, f, "n", e, 4), 4, "at most max")
	require.Len(t, claim(t, f, "n", e, 100), 6, "the rest of the due ones, none not due")
	jobs, err := f.Store.Claim(ctx, f.Pool, "n", e, all(f), 100, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"soon/"}, keys(jobs), "due within ahead, claimed early")
	require.True(t, jobs[0].RunAt.After(jobs[0].ClaimedAt), "claimed before it is due")
}

func claimNeedsLiveTerm(t *testing.T, f Fixture) {
	schedule(t, f, task("a", time.Now().Add(-time.Second), ""))
	e := node(t, f, "n")
	require.Empty(t, claim(t, f, "n", e+1000, 10), "another epoch claims nothing")
	require.Empty(t, claim(t, f, "nobody", e, 10), "an unregistered node claims nothing")
	require.NoError(t, f.Store.NodeDeregister(ctx, f.Pool, "n", e))
	require.Empty(t, claim(t, f, "n", e, 10), "a term that ended claims nothing")
	e2 := node(t, f, "n")
	require.Len(t, claim(t, f, "n", e2, 10), 1)
}

func orderWithinOrderingID(t *testing.T, f Fixture) {
	base := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	// Enqueued out of order, two with equal times: (scheduled_at, enqueue
	// order) decides.
	schedule(t, f, task("o", base.Add(3*time.Millisecond), "c"))
	schedule(t, f, task("o", base.Add(time.Millisecond), "b2"))
	schedule(t, f, task("o", base.Add(time.Millisecond), "b1"))
	schedule(t, f, task("o", base, "a"))
	e := node(t, f, "n")
	var order []string
	for range 4 {
		jobs := claim(t, f, "n", e, 10)
		require.Len(t, jobs, 1, "one at a time")
		order = append(order, jobs[0].UniquenessKey)
		_, err := f.Store.Finish(ctx, f.Pool, "n", e, []store.Outcome{outcome(jobs[0], pgschedtype.OutcomeCompleted)}, store.Handover{})
		require.NoError(t, err)
	}
	require.Equal(t, []string{"a", "b2", "b1", "c"}, order)
}

func finishIsFencedByClaim(t *testing.T, f Fixture) {
	schedule(t, f, task("a", time.Now().Add(-time.Second), ""))
	e := node(t, f, "n")
	jobs := claim(t, f, "n", e, 1)
	require.Len(t, jobs, 1)
	stale := outcome(jobs[0], pgschedtype.OutcomeCompleted)
	stale.ClaimedAt = stale.ClaimedAt.Add(-time.Millisecond)
	done, err := f.Store.Finish(ctx, f.Pool, "n", e, []store.Outcome{stale}, store.Handover{})
	require.NoError(t, err)
	require.Empty(t, done.Applied, "an outcome for another claim changes nothing")
	done, err = f.Store.Finish(ctx, f.Pool, "n", e+1, []store.Outcome{outcome(jobs[0], pgschedtype.OutcomeCompleted)}, store.Handover{})
	require.NoError(t, err)
	require.Empty(t, done.Applied, "nor does another term's")
	held, err := f.Store.HeldBy(ctx, f.Pool, "n", e)
	require.NoError(t, err)
	require.Len(t, held, 1, "still running")
	done, err = f.Store.Finish(ctx, f.Pool, "n", e, []store.Outcome{outcome(jobs[0], pgschedtype.OutcomeCompleted)}, store.Handover{})
	require.NoError(t, err)
	require.Equal(t, []int64{jobs[0].ID}, done.Applied)
}

func finishRetryReleaseDead(t *testing.T, f Fixture) {
	at := time.Now().Add(-time.Second)
	schedule(t, f, task("retry", at, ""), task("release", at, ""), task("dead", at, ""))
	e := node(t, f, "n")
	jobs := claim(t, f, "n", e, 10)
	require.Len(t, jobs, 3)
	var outs []store.Outcome
	for _, j := range jobs {
		o := outcome(j, pgschedtype.Outcome(j.OrderingID))
		if j.OrderingID == "retry" {
			o.RetryIn = time.Hour
			o.Error = "try later"
		}
		if j.OrderingID == "dead" {
			o.Error = "no hope"
		}
		outs = append(outs, o)
	}
	done, err := f.Store.Finish(ctx, f.Pool, "n", e, outs, store.Handover{})
	require.NoError(t, err)
	require.Len(t, done.Applied, 3)
	require.GreaterOrEqual(t, done.Claimable, 1, "the release left a head to claim")
	again := claim(t, f, "n", e, 10)
	require.Equal(t, []string{"release/"}, keys(again), "released: due again at once; retried: in an hour; dead: gone")
	first := jobs[slices.IndexFunc(jobs, func(j store.Claimed) bool { return j.OrderingID == "release" })]
	require.Equal(t, first.Attempt, again[0].Attempt, "a release uses no attempt")
	listed, err := f.Store.ListTasks(ctx, f.Pool, store.TaskFilter{OrderingID: "retry", Limit: 10})
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.Equal(t, "try later", listed[0].LastError)
	require.WithinDuration(t, time.Now().Add(time.Hour), listed[0].RunAt, time.Minute)
	dead, err := f.Store.ListTasks(ctx, f.Pool, store.TaskFilter{OrderingID: "dead", Limit: 10})
	require.NoError(t, err)
	require.Empty(t, dead, "a dead task leaves the pending tasks")
}

func finishHandsOver(t *testing.T, f Fixture) {
	at := time.Now().Add(-time.Second)
	schedule(t, f, task("o", at, "1"), task("o", at.Add(time.Millisecond), "2"), task("p", at, "1"))
	e := node(t, f, "n")
	jobs := claim(t, f, "n", e, 10)
	require.Equal(t, []string{"o/1", "p/1"}, keys(jobs))
	var outs []store.Outcome
	for _, j := range jobs {
		outs = append(outs, outcome(j, pgschedtype.OutcomeCompleted))
	}
	done, err := f.Store.Finish(ctx, f.Pool, "n", e, outs, store.Handover{Max: 2, Partitions: all(f), Limit: 16})
	require.NoError(t, err)
	require.Equal(t, []string{"o/2"}, keys(done.HandedOver), "the successor starts on this node")
	require.Equal(t, 1, done.HandedOver[0].Attempt, "handed over as its first attempt")
	held, err := f.Store.HeldBy(ctx, f.Pool, "n", e)
	require.NoError(t, err)
	require.Len(t, held, 1, "running, held by the node")
	require.Empty(t, claim(t, f, "n", e, 10), "nothing left to claim")
}

func manyPartitions(t *testing.T, f Fixture) {
	// Tasks over many partitions (on Citus, over both Citus workers): a
	// claim, a finish and a hand-over spanning them work as one.
	at := time.Now().Add(-time.Second)
	var tasks []store.NewTask
	for i := range 200 {
		tasks = append(tasks, task(fmt.Sprint("id-", i), at, "1"), task(fmt.Sprint("id-", i), at.Add(time.Millisecond), "2"))
	}
	schedule(t, f, tasks...)
	e := node(t, f, "n")
	jobs := claim(t, f, "n", e, 1000)
	require.Len(t, jobs, 200, "every head, none behind one")
	parts := map[int]bool{}
	for _, j := range jobs {
		parts[j.Partition] = true
	}
	require.Greater(t, len(parts), f.Partitions/2, "from most partitions")
	var outs []store.Outcome
	for _, j := range jobs {
		outs = append(outs, outcome(j, pgschedtype.OutcomeCompleted))
	}
	done, err := f.Store.Finish(ctx, f.Pool, "n", e, outs, store.Handover{Max: 150, Partitions: all(f), Limit: 16})
	require.NoError(t, err)
	require.Len(t, done.Applied, 200)
	require.Len(t, done.HandedOver, 150, "at most Max handed over, across partitions")
	require.Len(t, claim(t, f, "n", e, 1000), 50, "the successors not handed over wait for a claim")
}

func nextDueMostOverdueFirst(t *testing.T, f Fixture) {
	now := time.Now()
	schedule(t, f, task("late", now.Add(-3*time.Second), ""), task("later", now.Add(-time.Second), ""),
		task("future", now.Add(time.Hour), ""))
	due, err := f.Store.NextDue(ctx, f.Pool, all(f))
	require.NoError(t, err)
	distinct := map[int]bool{}
	for _, id := range []string{"late", "later", "future"} {
		distinct[partition.Of(id, f.Partitions)] = true
	}
	require.Len(t, due, len(distinct), "one entry per partition with idle heads")
	require.True(t, slices.IsSortedFunc(due, func(a, b store.DuePartition) int { return int(a.DueIn - b.DueIn) }), "most overdue first")
	require.Less(t, due[0].DueIn, -2*time.Second, "the earliest head's lateness")
	e := node(t, f, "n")
	claim(t, f, "n", e, 10)
	due, err = f.Store.NextDue(ctx, f.Pool, all(f))
	require.NoError(t, err)
	require.Len(t, due, 1, "running heads are not due")
}

func heldByAndRescue(t *testing.T, f Fixture) {
	at := time.Now().Add(-time.Second)
	schedule(t, f, task("a", at, ""), task("b", at, ""))
	e := node(t, f, "gone")
	jobs := claim(t, f, "gone", e, 10)
	require.Len(t, jobs, 2)
	held, err := f.Store.HeldBy(ctx, f.Pool, "gone", e)
	require.NoError(t, err)
	require.Len(t, held, 2)
	n, err := f.Store.RescueExpired(ctx, f.Pool, []string{"gone"})
	require.NoError(t, err)
	require.Zero(t, n, "a live node's tasks stay")
	_, err = f.Pool.Exec(ctx, "UPDATE "+f.Store.Schema()+".nodes SET lease_expires_at = now() - interval '1 second' WHERE node_id = 'gone'")
	require.NoError(t, err)
	n, err = f.Store.RescueExpired(ctx, f.Pool, nil)
	require.NoError(t, err)
	require.Equal(t, 2, n, "an expired node's tasks go back")
	other := node(t, f, "other")
	require.Len(t, claim(t, f, "other", other, 10), 2, "and run elsewhere")
}

// idIn returns an ordering_id starting with prefix in partition part.
func idIn(f Fixture, part int, prefix string) string {
	for i := 0; ; i++ {
		if id := fmt.Sprint(prefix, i); partition.Of(id, f.Partitions) == part {
			return id
		}
	}
}

func exec(t *testing.T, f Fixture, sql string, args ...any) {
	t.Helper()
	_, err := f.Pool.Exec(ctx, sql, args...)
	require.NoError(t, err, sql)
}

// count runs a count(*) query in the schema: {s} stands for its name.
func count(t *testing.T, f Fixture, sql string, args ...any) int {
	t.Helper()
	var n int
	sql = strings.ReplaceAll(sql, "{s}", f.Store.Schema())
	require.NoError(t, f.Pool.QueryRow(ctx, sql, args...).Scan(&n), sql)
	return n
}

// expire ends node's lease ago.
func expire(t *testing.T, f Fixture, node string, ago time.Duration) {
	t.Helper()
	exec(t, f, "UPDATE "+f.Store.Schema()+".nodes SET lease_expires_at = now() - make_interval(secs => $2) WHERE node_id = $1",
		node, ago.Seconds())
}

// held returns the one task (node, epoch) runs, as an outcome's key.
func held(t *testing.T, f Fixture, node string, epoch int64) store.Held {
	t.Helper()
	h, err := f.Store.HeldBy(ctx, f.Pool, node, epoch)
	require.NoError(t, err)
	require.Len(t, h, 1)
	return h[0]
}

func heldOutcome(h store.Held, what pgschedtype.Outcome) store.Outcome {
	return store.Outcome{Partition: h.Partition, OrderingID: h.OrderingID, ID: h.ID, ClaimedAt: h.ClaimedAt, Outcome: what}
}
