package pgsched_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedtype"
)

// allPartitions lists every logical partition of b's schema: a node that
// serves them all.
func allPartitions(t *testing.T, b clientBundle) []int32 {
	t.Helper()
	set, err := b.store.Settings(context.Background(), b.db.Pool)
	require.NoError(t, err)
	all := make([]int32, set.PartitionCount)
	for i := range all {
		all[i] = int32(i)
	}
	return all
}

// TestFinishHandsOver pins the handover contract of finish_tasks: a
// finished task's due successor starts on the finishing node as if
// claimed (running, attempt counted, node and epoch set), only within the
// given room and partitions and under a live term, and a run of handovers
// within one ordering_id stops at the limit, so its next task waits for a
// claim like everyone else's.
func TestFinishHandsOver(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	all := allPartitions(t, b)
	other := []int32{int32((pgsched.Partition("chain", len(all)) + 1) % len(all))}

	now := time.Now()
	var tasks []pgsched.Task
	for i := range 8 {
		tasks = append(tasks, pgsched.Task{OrderingID: "chain", ScheduledAt: now.Add(time.Duration(i) * time.Millisecond), UniquenessKey: fmt.Sprint(i)})
	}
	tasks = append(tasks,
		pgsched.Task{OrderingID: "future", ScheduledAt: now},
		pgsched.Task{OrderingID: "future", ScheduledAt: now.Add(time.Hour)})
	_, err := b.client.ScheduleMany(ctx, tasks)
	require.NoError(t, err)

	var epoch int64
	// finish completes c; claimable is how many heads the finish says it
	// left for a claim (the worker looks for due work only when that is
	// not zero).
	var claimable int
	finish := func(c store.Claimed, hand store.Handover) (applied []int64, next []store.Claimed) {
		t.Helper()
		res, err := b.store.Finish(ctx, b.db.Pool, "test-"+c.OrderingID, epoch, []store.Outcome{{
			Partition: c.Partition, OrderingID: c.OrderingID, ID: c.ID, ClaimedAt: c.ClaimedAt, Outcome: pgschedtype.OutcomeCompleted,
		}}, hand)
		require.NoError(t, err)
		claimable = res.Claimable
		return res.Applied, res.HandedOver
	}
	type head struct {
		Key     string
		Running bool
		Node    *string
		Epoch   *int64
		Attempt int
		Chain   int
	}
	headOf := func(o string) head {
		t.Helper()
		var h head
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT uniqueness_key, running, node_id, epoch, attempt, chain FROM "+
			b.db.Schema+".heads WHERE ordering_id = $1", o).Scan(&h.Key, &h.Running, &h.Node, &h.Epoch, &h.Attempt, &h.Chain))
		return h
	}
	idle := func(o, key string) {
		t.Helper()
		require.Equal(t, head{Key: key}, headOf(o), "%s's task %q waits idle for a claim", o, key)
	}
	hand := store.Handover{Max: 1, Partitions: all, Limit: 3}

	// Task 0 is claimed; 1, 2 and 3 are handed over, each the next in
	// order and left running for this node as a claim would leave it.
	c, e := claimTask(t, b, "chain")
	epoch = e
	for i := 1; i <= 3; i++ {
		applied, next := finish(c, hand)
		require.Equal(t, []int64{c.ID}, applied)
		require.Len(t, next, 1, "task %d handed over", i)
		require.Zero(t, claimable, "a handover leaves nothing for a claim")
		c = next[0]
		require.Equal(t, fmt.Sprint(i), c.UniquenessKey)
		require.Equal(t, 1, c.Attempt)
		node := "test-chain"
		require.Equal(t, head{Key: fmt.Sprint(i), Running: true, Node: &node, Epoch: &epoch, Attempt: 1, Chain: i}, headOf("chain"))
	}
	// The limit: task 4 waits for a claim, which starts a new run.
	applied, next := finish(c, hand)
	require.Equal(t, []int64{c.ID}, applied)
	require.Empty(t, next, "a run of handovers stops at the limit")
	require.Equal(t, 1, claimable)
	idle("chain", "4")
	c, epoch = claimTask(t, b, "chain")
	require.Equal(t, "4", c.UniquenessKey)
	_, next = finish(c, hand)
	require.Len(t, next, 1, "a claimed task hands over again")
	c = next[0]

	// No room: task 6 waits.
	_, next = finish(c, store.Handover{Partitions: all, Limit: 3})
	require.Empty(t, next)
	require.Equal(t, 1, claimable)
	idle("chain", "6")
	// Not a partition the node may take from: task 7 waits.
	c, epoch = claimTask(t, b, "chain")
	_, next = finish(c, store.Handover{Max: 1, Partitions: other, Limit: 3})
	require.Empty(t, next)
	require.Equal(t, 1, claimable)
	idle("chain", "7")
	// A stale term changes nothing and hands nothing over.
	c, epoch = claimTask(t, b, "chain")
	epoch--
	applied, next = finish(c, hand)
	require.Empty(t, applied)
	require.Empty(t, next)
	require.Zero(t, claimable)

	// Not due yet: the successor waits for its time.
	c, epoch = claimTask(t, b, "future")
	_, next = finish(c, hand)
	require.Empty(t, next)
	require.Equal(t, 1, claimable, "a successor due later counts: the worker must learn when it is due")
	idle("future", "")
}

// TestHandedOverTaskGivenBack: a handed-over task is running but outside
// the claim index (heads_due covers chain = 0 only); given back by a
// retry, a release or a rescue of its dead node it must be claimable
// again, or it would be lost to every claim.
func TestHandedOverTaskGivenBack(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	all := allPartitions(t, b)
	now := time.Now()
	var tasks []pgsched.Task
	for i := range 4 {
		tasks = append(tasks, pgsched.Task{OrderingID: "back", ScheduledAt: now.Add(time.Duration(i) * time.Millisecond), UniquenessKey: fmt.Sprint(i)})
	}
	_, err := b.client.ScheduleMany(ctx, tasks)
	require.NoError(t, err)

	// handOver finishes c, whose successor want is handed over to the same node.
	handOver := func(c store.Claimed, epoch int64, want string) store.Claimed {
		t.Helper()
		res, err := b.store.Finish(ctx, b.db.Pool, "test-back", epoch, []store.Outcome{{
			Partition: c.Partition, OrderingID: c.OrderingID, ID: c.ID, ClaimedAt: c.ClaimedAt, Outcome: pgschedtype.OutcomeCompleted,
		}}, store.Handover{Max: 1, Partitions: all, Limit: 16})
		require.NoError(t, err)
		require.Len(t, res.HandedOver, 1)
		require.Equal(t, want, res.HandedOver[0].UniquenessKey)
		return res.HandedOver[0]
	}
	giveBack := func(c store.Claimed, epoch int64, outcome pgschedtype.Outcome) {
		t.Helper()
		res, err := b.store.Finish(ctx, b.db.Pool, "test-back", epoch, []store.Outcome{{
			Partition: c.Partition, OrderingID: c.OrderingID, ID: c.ID, ClaimedAt: c.ClaimedAt, Outcome: outcome,
		}}, store.Handover{Max: 1, Partitions: all, Limit: 16})
		require.NoError(t, err)
		require.Equal(t, []int64{c.ID}, res.Applied)
		require.Empty(t, res.HandedOver)
		require.Equal(t, 1, res.Claimable, "a task given back is claimable")
	}
	claim := func(want string, attempt int) (store.Claimed, int64) {
		t.Helper()
		c, epoch := claimTask(t, b, "back")
		require.Equal(t, want, c.UniquenessKey)
		require.Equal(t, attempt, c.Attempt)
		return c, epoch
	}

	c, epoch := claim("0", 1)
	giveBack(handOver(c, epoch, "1"), epoch, pgschedtype.OutcomeRetry) // RetryIn 0: due again at once
	c, epoch = claim("1", 2)
	giveBack(handOver(c, epoch, "2"), epoch, pgschedtype.OutcomeRelease)
	c, epoch = claim("2", 1)
	handOver(c, epoch, "3")
	// Task 3's node's lease lapses; a rescue gives it back.
	_, err = b.db.Pool.Exec(ctx, "UPDATE "+b.db.Schema+".nodes SET lease_expires_at = now() - interval '1 second' WHERE node_id = 'test-back'")
	require.NoError(t, err)
	n, err := b.store.RescueExpired(ctx, b.db.Pool, nil)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	claim("3", 2)
}

// TestKnownSuccessors: a promotion notes the next few backlog tasks in the
// new head (next_ids, next_more), later finishes take them in that order
// without searching, and every change to the backlog makes the head forget
// them first, so the run order stays (scheduled_at, enqueue order): a
// cancel, an enqueue of an earlier task and a reschedule in the middle of
// a known run, a known run running out, and ties in scheduled_at (which
// are never noted).
func TestKnownSuccessors(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	all := allPartitions(t, b)
	// noted mirrors finish_tasks: a search for a successor notes the next
	// 8 tasks in the new head.
	const noted = 8
	const n = 2*noted + 14
	// Due at once: in the past, within a grace window widened so a slow
	// server (Citus) does not see the later calls' times as too old.
	_, err := b.db.Pool.Exec(ctx, "SELECT "+b.db.Schema+".configure(grace => '1 minute')")
	require.NoError(t, err)
	base := time.Now().Add(-3 * time.Second).Truncate(time.Millisecond)
	at := func(i int) time.Time { return base.Add(time.Duration(i) * 10 * time.Millisecond) }
	key := func(i int) string { return fmt.Sprintf("%02d", i) }
	var tasks []pgsched.Task
	for i := range n {
		tasks = append(tasks, pgsched.Task{OrderingID: "k", ScheduledAt: at(i), UniquenessKey: key(i)})
	}
	_, err = b.client.ScheduleMany(ctx, tasks)
	require.NoError(t, err)

	// ids by uniqueness_key, and what the head of o knows.
	idOf := func(o, key string) int64 {
		t.Helper()
		var id int64
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT id FROM "+b.db.Schema+".tasks WHERE ordering_id = $1 AND uniqueness_key = $2", o, key).Scan(&id))
		return id
	}
	type knows struct {
		IDs  []int64
		More bool
	}
	known := func(o string) knows {
		t.Helper()
		var k knows
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT next_ids, next_more FROM "+b.db.Schema+".heads WHERE ordering_id = $1", o).Scan(&k.IDs, &k.More))
		return k
	}
	// span is the ids of tasks from..to of k, less those in skip.
	span := func(from, to int, skip ...int) []int64 {
		var out []int64
		for i := from; i <= to; i++ {
			if !slices.Contains(skip, i) {
				out = append(out, idOf("k", key(i)))
			}
		}
		return out
	}
	var epoch int64
	// next finishes c and returns its handed-over successor.
	next := func(c store.Claimed) store.Claimed {
		t.Helper()
		res, err := b.store.Finish(ctx, b.db.Pool, "test-"+c.OrderingID, epoch, []store.Outcome{{
			Partition: c.Partition, OrderingID: c.OrderingID, ID: c.ID, ClaimedAt: c.ClaimedAt, Outcome: pgschedtype.OutcomeCompleted,
		}}, store.Handover{Max: 1, Partitions: all, Limit: 1000})
		require.NoError(t, err)
		require.Equal(t, []int64{c.ID}, res.Applied)
		require.Len(t, res.HandedOver, 1, "after %s", c.UniquenessKey)
		return res.HandedOver[0]
	}

	c, e := claimTask(t, b, "k")
	epoch = e
	require.Equal(t, key(0), c.UniquenessKey)
	require.Equal(t, knows{}, known("k"), "an enqueued head knows nothing yet")
	// The search for 01 notes the 8 after it, and there is more.
	c = next(c)
	require.Equal(t, key(1), c.UniquenessKey)
	last := 1 + noted
	require.Equal(t, knows{IDs: span(2, last), More: true}, known("k"))
	for i := 2; i <= last; i++ {
		c = next(c)
		require.Equal(t, key(i), c.UniquenessKey)
		if i < last {
			require.Equal(t, knows{IDs: span(i+1, last), More: true}, known("k"))
		}
	}
	// The last known one runs: the next is searched for again.
	require.Equal(t, knows{More: true}, known("k"))
	c = next(c)
	s := last + 1
	require.Equal(t, key(s), c.UniquenessKey)
	require.Equal(t, knows{IDs: span(s+1, s+noted), More: true}, known("k"))

	// A cancel in the known run: the head forgets; s+2 never runs.
	require.NoError(t, b.client.Cancel(ctx, pgsched.Key{OrderingID: "k", ScheduledAt: at(s + 2), UniquenessKey: key(s + 2)}))
	require.Equal(t, knows{More: true}, known("k"))
	c = next(c)
	require.Equal(t, key(s+1), c.UniquenessKey)
	require.Equal(t, knows{IDs: span(s+3, s+2+noted), More: true}, known("k"))

	// An earlier task enqueued while s+1 runs goes before the known s+3.
	_, err = b.client.Schedule(ctx, pgsched.Task{OrderingID: "k", ScheduledAt: at(s + 2), UniquenessKey: "early"})
	require.NoError(t, err)
	require.Equal(t, knows{More: true}, known("k"))
	c = next(c)
	require.Equal(t, "early", c.UniquenessKey)

	// s+4 moved to the end while s+3 runs: s+3, s+5, ..., n-1, then s+4.
	c = next(c)
	require.Equal(t, key(s+3), c.UniquenessKey)
	require.NoError(t, b.client.Reschedule(ctx, pgsched.Key{OrderingID: "k", ScheduledAt: at(s + 4), UniquenessKey: key(s + 4)}, at(n+10)))
	require.Equal(t, knows{More: true}, known("k"))
	for i := s + 5; i < n; i++ {
		c = next(c)
		require.Equal(t, key(i), c.UniquenessKey)
	}
	c = next(c)
	require.Equal(t, key(s+4), c.UniquenessKey)
	require.Equal(t, knows{}, known("k"), "the last task knows nothing, and nothing follows")

	// Ties: the same scheduled_at runs in enqueue order (id), which the
	// backlog's index (by uniqueness_key) does not give, so a window with
	// a tie is never noted. x2 ("z") is enqueued before x3 ("a").
	for _, task := range []pgsched.Task{
		{OrderingID: "tie", ScheduledAt: at(0), UniquenessKey: "x0"},
		{OrderingID: "tie", ScheduledAt: at(1), UniquenessKey: "x1"},
		{OrderingID: "tie", ScheduledAt: at(2), UniquenessKey: "z"},
		{OrderingID: "tie", ScheduledAt: at(2), UniquenessKey: "a"},
		{OrderingID: "tie", ScheduledAt: at(3), UniquenessKey: "x4"},
	} {
		_, err = b.client.Schedule(ctx, task)
		require.NoError(t, err)
	}
	c, epoch = claimTask(t, b, "tie")
	var order []string
	for {
		order = append(order, c.UniquenessKey)
		if c.UniquenessKey == "x0" {
			// The search for x1 saw the tie further on: nothing noted.
			res, err := b.store.Finish(ctx, b.db.Pool, "test-tie", epoch, []store.Outcome{{
				Partition: c.Partition, OrderingID: c.OrderingID, ID: c.ID, ClaimedAt: c.ClaimedAt, Outcome: pgschedtype.OutcomeCompleted,
			}}, store.Handover{Max: 1, Partitions: all, Limit: 1000})
			require.NoError(t, err)
			require.Len(t, res.HandedOver, 1)
			require.Equal(t, knows{}, known("tie"))
			c = res.HandedOver[0]
			continue
		}
		if c.UniquenessKey == "x4" {
			break
		}
		c = next(c)
	}
	require.Equal(t, []string{"x0", "x1", "z", "a", "x4"}, order)
}

// TestFinishServingNoPartitions: a node that lost every partition while
// its tasks still ran finishes them with an empty list of partitions to
// hand over in, which reaches the database as NULL. The finish must record
// the outcomes and hand nothing over, on both promotion paths (a successor
// the head knew, a look into the backlog); it used to fail the whole batch
// with a NOT NULL violation on every retry.
func TestFinishServingNoPartitions(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	now := time.Now()
	var tasks []pgsched.Task
	for i := range 3 {
		tasks = append(tasks, pgsched.Task{OrderingID: "np", ScheduledAt: now.Add(time.Duration(i) * time.Millisecond), UniquenessKey: fmt.Sprint(i)})
	}
	_, err := b.client.ScheduleMany(ctx, tasks)
	require.NoError(t, err)
	for i, path := range []string{"backlog probe", "known successor"} {
		c, epoch := claimTask(t, b, "np")
		require.Equal(t, fmt.Sprint(i), c.UniquenessKey)
		var known bool
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT next_tids IS NOT NULL FROM "+b.db.Schema+".heads WHERE ordering_id = 'np'").Scan(&known))
		require.Equal(t, i == 1, known, "%s: the head knows its successor", path)
		res, err := b.store.Finish(ctx, b.db.Pool, "test-np", epoch, []store.Outcome{{
			Partition: c.Partition, OrderingID: c.OrderingID, ID: c.ID, ClaimedAt: c.ClaimedAt, Outcome: pgschedtype.OutcomeCompleted,
		}}, store.Handover{Max: 1, Partitions: nil, Limit: 16})
		require.NoError(t, err, path)
		require.Equal(t, []int64{c.ID}, res.Applied, path)
		require.Empty(t, res.HandedOver, path)
		require.Equal(t, 1, res.Claimable, "%s: the next task waits for a claim", path)
	}
}
