package lease

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type fixture struct {
	db *pgtest.DB
	st store.Store
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	st, err := store.New(db.Schema)
	require.NoError(t, err)
	return fixture{db: db, st: st}
}

// runNode starts a node and waits for its first term; it stops with the
// test (or when the returned cancel is called).
func (f fixture) runNode(t *testing.T, id string) (*Node, context.CancelFunc) {
	t.Helper()
	n, err := NewNode(NodeConfig{ID: id, Store: f.st, DB: f.db.Pool, TTL: time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = n.Run(ctx) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	require.Eventually(t, func() bool { return n.Current() != nil }, pgtest.Patience(10*time.Second), 5*time.Millisecond)
	return n, stop
}

func (f fixture) runLeader(t *testing.T, n *Node, ttl time.Duration, rounds *sync.Map) (*Leader, context.CancelFunc) {
	t.Helper()
	l, err := NewLeader(LeaderConfig{
		Node: n, Store: f.st, DB: f.db.Pool, TTL: ttl, Interval: 50 * time.Millisecond,
		Round: func(_ context.Context, ls Leadership) { rounds.Store(ls.Term, ls.NodeID) },
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return l, stop
}

// TestLeaderElection: of three competing nodes exactly one leads, every
// round runs under one term by one node, and a resigning leader is
// replaced at once under a new term: the leader lease's TTL is a minute,
// far beyond how long the test waits for the new term, so only the
// resignation can have freed it.
func TestLeaderElection(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const leaderTTL = time.Minute
	var rounds sync.Map
	var leaders []*Leader
	var stops []context.CancelFunc
	for _, id := range []string{"a", "b", "c"} {
		n, _ := f.runNode(t, id)
		l, stop := f.runLeader(t, n, leaderTTL, &rounds)
		leaders = append(leaders, l)
		stops = append(stops, stop)
	}
	current := func() (int, Leadership) {
		k, held := 0, Leadership{}
		for _, l := range leaders {
			if c := l.Current(); c.Term != 0 {
				k, held = k+1, c
			}
		}
		return k, held
	}
	require.Eventually(t, func() bool { k, _ := current(); return k == 1 }, pgtest.Patience(10*time.Second), 5*time.Millisecond)
	for range 20 {
		k, _ := current()
		require.LessOrEqual(t, k, 1, "never two leaders")
		time.Sleep(10 * time.Millisecond)
	}
	_, first := current()

	var idx int
	for i, l := range leaders {
		if l.Current().Term == first.Term {
			idx = i
		}
	}
	stops[idx]()
	var second Leadership
	require.Eventually(t, func() bool {
		k, held := current()
		second = held
		return k == 1 && held.Term != first.Term
	}, pgtest.Patience(10*time.Second), 5*time.Millisecond)
	require.Greater(t, second.Term, first.Term, "a new term")
	require.NotEqual(t, first.NodeID, second.NodeID)

	// Each term's rounds ran on one node only.
	rounds.Range(func(term, node any) bool {
		switch term.(int64) {
		case first.Term:
			require.Equal(t, first.NodeID, node)
		case second.Term:
			require.Equal(t, second.NodeID, node)
		}
		return true
	})
}

// TestLeaderWritesAreFenced: only the node holding the leader lease can
// write assignments or deplete nodes.
func TestLeaderWritesAreFenced(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	a, _ := f.runNode(t, "a")
	b, _ := f.runNode(t, "b")
	ta, tb := a.Current(), b.Current()
	term, err := f.st.LeaderAcquire(ctx, f.db.Pool, "a", ta.Epoch, time.Minute)
	require.NoError(t, err)
	require.NotZero(t, term)
	again, err := f.st.LeaderAcquire(ctx, f.db.Pool, "b", tb.Epoch, time.Minute)
	require.NoError(t, err)
	require.Zero(t, again, "b cannot take a live lease")
	stale, err := f.st.LeaderAcquire(ctx, f.db.Pool, "a", ta.Epoch-1, time.Minute)
	require.NoError(t, err)
	require.Zero(t, stale, "an old epoch of a cannot lead")

	owners := make([]string, 8)
	for i := range owners {
		owners[i] = "b"
	}
	ok, err := f.st.Assign(ctx, f.db.Pool, "b", tb.Epoch, owners, map[string]string{"a": "b", "b": "a"})
	require.NoError(t, err)
	require.False(t, ok, "a follower's plan is refused")
	got, err := f.st.PartitionOwners(ctx, f.db.Pool)
	require.NoError(t, err)
	require.Equal(t, make([]string, 8), got, "and changes nothing")
	gone, err := f.st.Deplete(ctx, f.db.Pool, "b", tb.Epoch, 0)
	require.NoError(t, err)
	require.Empty(t, gone)

	ok, err = f.st.Assign(ctx, f.db.Pool, "a", ta.Epoch, owners, map[string]string{"a": "b", "b": "a"})
	require.NoError(t, err)
	require.True(t, ok)
	got, err = f.st.PartitionOwners(ctx, f.db.Pool)
	require.NoError(t, err)
	require.Equal(t, owners, got)
	backups, err := f.st.Backups(ctx, f.db.Pool)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a": "b", "b": "a"}, backups)
}

// TestStandInChain: a down node is served by its backup, or, when that is
// down too, by the first live node along the backup chain; a node whose
// whole chain is down is served by nobody.
func TestStandInChain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	s := f.db.Schema
	// No array subscript in the UPDATE: Citus 13.2's coordinator crashes
	// on one in a modification of a reference table.
	err := pgx.BeginFunc(ctx, f.db.Pool, func(tx pgx.Tx) error {
		for _, q := range []string{
			`INSERT INTO ` + s + `.nodes (node_id, epoch, lease_expires_at) VALUES
				('live-1', 1, now() + interval '1 hour'), ('down-1', 2, now() - interval '1 second'),
				('down-2', 3, now() - interval '1 second'), ('live-2', 4, now() + interval '1 hour')`,
			`INSERT INTO ` + s + `.backups (node_id, backup_node_id, term, assigned_at) VALUES
				('down-1', 'down-2', 1, now()), ('down-2', 'live-2', 1, now()), ('live-2', 'live-1', 1, now()),
				('live-1', 'down-1', 1, now()), ('gone', 'down-1', 1, now())`,
			`UPDATE ` + s + `.partition_owners SET node_id = split_part('live-1 down-1 down-2 live-2 gone', ' ', partition_id % 5 + 1)`,
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)

	for node, want := range map[string][]string{"live-1": {}, "live-2": {"down-1", "down-2", "gone"}} {
		got, err := f.st.StandIns(ctx, f.db.Pool, node)
		require.NoError(t, err)
		require.ElementsMatch(t, want, got, node)
	}
	duties, err := f.st.Duties(ctx, f.db.Pool, "live-2")
	require.NoError(t, err)
	var parts []int32
	for _, d := range duties {
		parts = append(parts, d.Partition)
	}
	// Partitions 0..7 with owners by p % 5: live-1 {0,5}, down-1 {1,6},
	// down-2 {2,7}, live-2 {3}, gone {4}: live-2 serves all but live-1's.
	require.Equal(t, []int32{1, 2, 3, 4, 6, 7}, parts)

	// The whole chain down: nobody serves.
	_, err = f.db.Pool.Exec(ctx, `UPDATE `+s+`.nodes SET lease_expires_at = now() - interval '1 second' WHERE node_id LIKE 'live-%'`)
	require.NoError(t, err)
	var unserved int
	require.NoError(t, f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM `+s+`.partitions WHERE served_by IS NULL`).Scan(&unserved))
	require.Equal(t, 8, unserved)
}

func TestCompact(t *testing.T) {
	require.Equal(t, "", compact(nil))
	require.Equal(t, "3", compact([]int32{3}))
	require.Equal(t, "0-3,7,9-10", compact([]int32{0, 1, 2, 3, 7, 9, 10}))
}
