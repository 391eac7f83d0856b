package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/store"
)

// nodeTerms: a registration starts a term (epoch, lease); another process
// (instance) waits for a live one; the same process registers again under
// a later epoch. Only the current, unexpired term renews; a leaving node
// keeps its row; deregistering removes it; NodeCounts tells live from
// expired.
func nodeTerms(t *testing.T, f Fixture) {
	r, err := f.Store.NodeRegister(ctx, f.Pool, "n", "proc-1", time.Minute, "host-1", 11, false, 0)
	require.NoError(t, err)
	require.Empty(t, r.Wait)
	require.Positive(t, r.Epoch)
	require.WithinDuration(t, time.Now().Add(time.Minute), r.ExpiresAt, 30*time.Second)

	other, err := f.Store.NodeRegister(ctx, f.Pool, "n", "proc-2", time.Minute, "host-2", 22, false, 0)
	require.NoError(t, err)
	require.Equal(t, store.WaitNodeID, other.Wait, "another process waits for the live term")
	require.Equal(t, "host-1", other.HolderHost)
	require.Equal(t, 11, other.HolderPID)
	require.Greater(t, other.WaitFor, 30*time.Second, "until the lease runs out")

	again, err := f.Store.NodeRegister(ctx, f.Pool, "n", "proc-1", time.Minute, "host-1", 11, false, r.Epoch+100)
	require.NoError(t, err)
	require.Empty(t, again.Wait)
	require.Greater(t, again.Epoch, r.Epoch+100, "a later epoch than any the process held")

	renewed, err := f.Store.NodeRenew(ctx, f.Pool, "n", again.Epoch, time.Hour)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(time.Hour), renewed, 30*time.Second)
	_, err = f.Store.NodeRenew(ctx, f.Pool, "n", r.Epoch, time.Hour)
	require.ErrorIs(t, err, store.ErrLeaseLost, "the earlier term")
	active, inactive, err := f.Store.NodeCounts(ctx, f.Pool)
	require.NoError(t, err)
	require.Equal(t, [2]int{1, 0}, [2]int{active, inactive})

	expire(t, f, "n", time.Second)
	_, err = f.Store.NodeRenew(ctx, f.Pool, "n", again.Epoch, time.Hour)
	require.ErrorIs(t, err, store.ErrLeaseLost, "an expired lease")
	active, inactive, err = f.Store.NodeCounts(ctx, f.Pool)
	require.NoError(t, err)
	require.Equal(t, [2]int{0, 1}, [2]int{active, inactive})
	took, err := f.Store.NodeRegister(ctx, f.Pool, "n", "proc-2", time.Minute, "host-2", 22, false, 0)
	require.NoError(t, err)
	require.Empty(t, took.Wait, "once the lease ran out, another process takes the id")

	require.NoError(t, f.Store.NodeLeave(ctx, f.Pool, "n", took.Epoch))
	members, err := f.Store.Members(ctx, f.Pool)
	require.NoError(t, err)
	require.Equal(t, []store.Member{{ID: "n", Leaving: true}}, members)
	require.NoError(t, f.Store.NodeDeregister(ctx, f.Pool, "n", again.Epoch))
	members, err = f.Store.Members(ctx, f.Pool)
	require.NoError(t, err)
	require.Len(t, members, 1, "another term's deregistration removes nothing")
	require.NoError(t, f.Store.NodeDeregister(ctx, f.Pool, "n", took.Epoch))
	members, err = f.Store.Members(ctx, f.Pool)
	require.NoError(t, err)
	require.Empty(t, members)
}

// plan assigns partitions to nodes in turn.
func plan(f Fixture, nodes ...string) []string {
	owners := make([]string, f.Partitions)
	for i := range owners {
		owners[i] = nodes[i%len(nodes)]
	}
	return owners
}

// leaderAndPlan: one live node holds the leader lease at a time, under a
// term; only it writes the plan (owners and backups), which the owners,
// backups and duties reads return; resigning or an expired lease lets
// another node take over under a new term; a leaving node may not lead.
func leaderAndPlan(t *testing.T, f Fixture) {
	ea, eb := node(t, f, "a"), node(t, f, "b")
	term, err := f.Store.LeaderAcquire(ctx, f.Pool, "a", ea, time.Minute)
	require.NoError(t, err)
	require.Positive(t, term)
	other, err := f.Store.LeaderAcquire(ctx, f.Pool, "b", eb, time.Minute)
	require.NoError(t, err)
	require.Zero(t, other, "another node leads")
	renewed, err := f.Store.LeaderAcquire(ctx, f.Pool, "a", ea, time.Minute)
	require.NoError(t, err)
	require.Equal(t, term, renewed, "renewed under the same term")

	owners := plan(f, "a", "b")
	backups := map[string]string{"a": "b", "b": "a"}
	ok, err := f.Store.Assign(ctx, f.Pool, "b", eb, plan(f, "b"), map[string]string{})
	require.NoError(t, err)
	require.False(t, ok, "only the leader plans")
	got, err := f.Store.PartitionOwners(ctx, f.Pool)
	require.NoError(t, err)
	require.Equal(t, make([]string, f.Partitions), got, "nothing assigned yet")
	ok, err = f.Store.Assign(ctx, f.Pool, "a", ea, owners, backups)
	require.NoError(t, err)
	require.True(t, ok)
	got, err = f.Store.PartitionOwners(ctx, f.Pool)
	require.NoError(t, err)
	require.Equal(t, owners, got)
	gotBackups, err := f.Store.Backups(ctx, f.Pool)
	require.NoError(t, err)
	require.Equal(t, backups, gotBackups)
	duties, err := f.Store.Duties(ctx, f.Pool, "b")
	require.NoError(t, err)
	var want []store.Duty
	for p, o := range owners {
		if o == "b" {
			want = append(want, store.Duty{Partition: int32(p), Owner: "b"})
		}
	}
	require.Equal(t, want, duties, "a live owner serves its own partitions")
	standIns, err := f.Store.StandIns(ctx, f.Pool, "b")
	require.NoError(t, err)
	require.Empty(t, standIns)

	// A new plan: b's backup goes away, a owns everything.
	ok, err = f.Store.Assign(ctx, f.Pool, "a", ea, plan(f, "a"), map[string]string{"a": "b"})
	require.NoError(t, err)
	require.True(t, ok)
	gotBackups, err = f.Store.Backups(ctx, f.Pool)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a": "b"}, gotBackups)
	duties, err = f.Store.Duties(ctx, f.Pool, "b")
	require.NoError(t, err)
	require.Empty(t, duties)

	resigned, err := f.Store.LeaderResign(ctx, f.Pool, "b", eb)
	require.NoError(t, err)
	require.False(t, resigned, "b does not lead")
	resigned, err = f.Store.LeaderResign(ctx, f.Pool, "a", ea)
	require.NoError(t, err)
	require.True(t, resigned)
	next, err := f.Store.LeaderAcquire(ctx, f.Pool, "b", eb, time.Minute)
	require.NoError(t, err)
	require.Greater(t, next, term, "b leads, under a new term")
	ok, err = f.Store.Assign(ctx, f.Pool, "a", ea, plan(f, "b"), nil)
	require.NoError(t, err)
	require.False(t, ok, "the former leader plans no more")

	// b's leader lease runs out: a takes over; a leaving node cannot.
	exec(t, f, "UPDATE "+f.Store.Schema()+".leader SET lease_expires_at = now() - interval '1 second'")
	require.NoError(t, f.Store.NodeLeave(ctx, f.Pool, "a", ea))
	none, err := f.Store.LeaderAcquire(ctx, f.Pool, "a", ea, time.Minute)
	require.NoError(t, err)
	require.Zero(t, none, "a leaving node does not lead")
	ec := node(t, f, "c")
	third, err := f.Store.LeaderAcquire(ctx, f.Pool, "c", ec, time.Minute)
	require.NoError(t, err)
	require.Greater(t, third, next, "the expired lease is taken under a new term")
}

// standIns: a node whose lease ran out (or that leaves) is stood in for
// by its backup, which serves its partitions for it; BackedUp tells the
// backup how long each lease it watches has left; the leader rescues
// only nodes nobody stands in for (ExpiredUnserved).
func standIns(t *testing.T, f Fixture) {
	ea, eb := node(t, f, "a"), node(t, f, "b")
	_, err := f.Store.LeaderAcquire(ctx, f.Pool, "b", eb, time.Hour)
	require.NoError(t, err)
	owners := plan(f, "a", "b")
	ok, err := f.Store.Assign(ctx, f.Pool, "b", eb, owners, map[string]string{"a": "b", "b": "a"})
	require.NoError(t, err)
	require.True(t, ok)
	watched, err := f.Store.BackedUp(ctx, f.Pool, "b")
	require.NoError(t, err)
	require.Len(t, watched, 1)
	require.Greater(t, watched["a"], 30*time.Minute, "a's lease has about an hour left")

	expire(t, f, "a", time.Second)
	watched, err = f.Store.BackedUp(ctx, f.Pool, "b")
	require.NoError(t, err)
	require.Negative(t, watched["a"], "a's lease ended")
	standIns, err := f.Store.StandIns(ctx, f.Pool, "b")
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, standIns)
	duties, err := f.Store.Duties(ctx, f.Pool, "b")
	require.NoError(t, err)
	require.Len(t, duties, f.Partitions, "b serves every partition")
	for _, d := range duties {
		require.Equal(t, owners[d.Partition], d.Owner, "partition %d served for its owner", d.Partition)
	}
	unserved, err := f.Store.ExpiredUnserved(ctx, f.Pool)
	require.NoError(t, err)
	require.Empty(t, unserved, "b stands in for a")

	expire(t, f, "b", time.Second)
	unserved, err = f.Store.ExpiredUnserved(ctx, f.Pool)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, unserved, "both down: nobody stands in")

	// a comes back; b is gone for good: a stands in for b.
	_, err = f.Store.NodeRenew(ctx, f.Pool, "a", ea, time.Hour)
	require.ErrorIs(t, err, store.ErrLeaseLost)
	ea2 := node(t, f, "a")
	require.NoError(t, f.Store.NodeDeregister(ctx, f.Pool, "b", eb))
	standIns, err = f.Store.StandIns(ctx, f.Pool, "a")
	require.NoError(t, err)
	require.Equal(t, []string{"b"}, standIns)
	watched, err = f.Store.BackedUp(ctx, f.Pool, "a")
	require.NoError(t, err)
	require.Negative(t, watched["b"], "a deregistered node counts as ended")
	require.NoError(t, f.Store.NodeLeave(ctx, f.Pool, "a", ea2))
	standIns, err = f.Store.StandIns(ctx, f.Pool, "a")
	require.NoError(t, err)
	require.Empty(t, standIns, "a leaving node stands in for nobody")
}

// deplete: the leader removes the nodes whose lease ended more than the
// flex-down ago, after giving their running tasks back; nodes expired
// more recently stay, and no one else may deplete.
func deplete(t *testing.T, f Fixture) {
	el := node(t, f, "leader")
	_, err := f.Store.LeaderAcquire(ctx, f.Pool, "leader", el, time.Hour)
	require.NoError(t, err)
	eo, er := node(t, f, "old"), node(t, f, "recent")
	f.DB.InsertTask(t, pgtest.TaskRow{OrderingID: "held-by-old", State: "running", NodeID: "old", Epoch: eo, Attempt: 1})
	f.DB.InsertTask(t, pgtest.TaskRow{OrderingID: "held-by-recent", State: "running", NodeID: "recent", Epoch: er, Attempt: 1})
	expire(t, f, "old", time.Hour)
	expire(t, f, "recent", time.Second)

	gone, err := f.Store.Deplete(ctx, f.Pool, "recent", er, time.Minute)
	require.NoError(t, err)
	require.Empty(t, gone, "only the leader depletes")
	gone, err = f.Store.Deplete(ctx, f.Pool, "leader", el, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"old"}, gone)
	members, err := f.Store.Members(ctx, f.Pool)
	require.NoError(t, err)
	var ids []string
	for _, m := range members {
		ids = append(ids, m.ID)
	}
	require.Equal(t, []string{"leader", "recent"}, ids)
	running, err := f.Store.ListTasks(ctx, f.Pool, store.TaskFilter{State: "running", Limit: 10})
	require.NoError(t, err)
	require.Len(t, running, 1)
	require.Equal(t, "held-by-recent", running[0].OrderingID, "the depleted node's task went back, the other's stays")
	require.True(t, slices.ContainsFunc(claim(t, f, "leader", el, 10), func(c store.Claimed) bool { return c.OrderingID == "held-by-old" }))
}
