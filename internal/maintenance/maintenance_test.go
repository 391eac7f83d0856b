package maintenance

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/lease"
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

// lead runs a node and makes it the leader, returning its leadership.
func (f fixture) lead(t *testing.T, id string) lease.Leadership {
	t.Helper()
	n, err := lease.NewNode(lease.NodeConfig{ID: id, Store: f.st, DB: f.db.Pool, TTL: time.Minute})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = n.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool { return n.Current() != nil }, pgtest.Patience(10*time.Second), 5*time.Millisecond)
	term, err := f.st.LeaderAcquire(context.Background(), f.db.Pool, id, n.Current().Epoch, time.Minute)
	require.NoError(t, err)
	return lease.Leadership{Term: term, NodeID: id, Epoch: n.Current().Epoch}
}

func (f fixture) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := f.db.Pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

var quiet = slog.New(slog.DiscardHandler)

// TestLeaderRounds: the plan assigns balanced partitions and a backup per
// member, keeps a down node's partitions until the flex-down window ends,
// then deplete removes it and the plan moves them to the live node.
func TestLeaderRounds(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	s := f.db.Schema
	l := f.lead(t, "a")
	// b is a bare row, so the test decides when its lease ends (as if
	// SIGKILLed: no deregistration).
	f.exec(t, "INSERT INTO "+s+".nodes (node_id, epoch, lease_expires_at) VALUES ('b', 1000, now() + interval '1 hour')")
	planner, err := lease.NewPlanner(lease.PlannerConfig{Store: f.st, DB: f.db.Pool})
	require.NoError(t, err)
	var depleted []string
	r := (&Runner{Logger: quiet}).
		Add(&Deplete{Store: f.st, DB: f.db.Pool, FlexDown: 300 * time.Millisecond, Logger: quiet,
			Depleted: func(n []string) { depleted = append(depleted, n...) }}, 0).
		Add(planner, 0)
	r.Round(ctx, l)
	owners, err := f.st.PartitionOwners(ctx, f.db.Pool)
	require.NoError(t, err)
	count := map[string]int{}
	for _, o := range owners {
		count[o]++
	}
	require.Equal(t, map[string]int{"a": 4, "b": 4}, count)
	backups, err := f.st.Backups(ctx, f.db.Pool)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a": "b", "b": "a"}, backups)

	// b dies without deregistering: its lease runs out, it stays a member
	// (a stands in) until the flex-down window passes.
	f.exec(t, "UPDATE "+s+".nodes SET lease_expires_at = now() WHERE node_id = 'b'")
	r.Round(ctx, l)
	owners, err = f.st.PartitionOwners(ctx, f.db.Pool)
	require.NoError(t, err)
	require.Contains(t, owners, "b", "inside the flex-down window b keeps its partitions")
	standIns, err := f.st.StandIns(ctx, f.db.Pool, "a")
	require.NoError(t, err)
	require.Equal(t, []string{"b"}, standIns)

	require.Eventually(t, func() bool {
		r.Round(ctx, l)
		owners, err := f.st.PartitionOwners(ctx, f.db.Pool)
		require.NoError(t, err)
		for _, o := range owners {
			if o != "a" {
				return false
			}
		}
		return true
	}, pgtest.Patience(10*time.Second), 20*time.Millisecond, "after flex-down b is depleted and a owns everything")
	require.Equal(t, []string{"b"}, depleted)
	members, err := f.st.Members(ctx, f.db.Pool)
	require.NoError(t, err)
	require.Len(t, members, 1)
	backups, err = f.st.Backups(ctx, f.db.Pool)
	require.NoError(t, err)
	require.Empty(t, backups, "a lone node has no backup")
}

// TestRescue: each round gives back the running tasks of expired nodes
// nobody stands in for (those with a stand-in are the stand-in's to
// rescue); the periodic sweep gives back every task whose node's lease is
// not live, including nodes with no row at all.
func TestRescue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	s := f.db.Schema
	l := f.lead(t, "a")
	f.exec(t, "INSERT INTO "+s+".nodes (node_id, epoch, lease_expires_at) VALUES ('b', 1000, now() + interval '1 hour'), ('c', 2000, now() + interval '1 hour')")
	for node, epoch := range map[string]int{"b": 1000, "c": 2000, "x": 3000} {
		f.exec(t, "SELECT "+s+".schedule($1, now())", "o"+node)
		f.exec(t, "UPDATE "+s+".heads SET running = true, node_id = $1, epoch = $2, attempt = 1, claimed_at = now() WHERE ordering_id = $3", node, epoch, "o"+node)
	}
	planner, err := lease.NewPlanner(lease.PlannerConfig{Store: f.st, DB: f.db.Pool})
	require.NoError(t, err)
	require.NoError(t, planner.Round(ctx, l)) // backups: c's stand-in exists
	runningOf := func() map[string]bool {
		t.Helper()
		rows, err := f.db.Pool.Query(ctx, "SELECT ordering_id FROM "+s+".heads WHERE running")
		require.NoError(t, err)
		defer rows.Close()
		out := map[string]bool{}
		for rows.Next() {
			var o string
			require.NoError(t, rows.Scan(&o))
			out[o] = true
		}
		return out
	}
	rescued := 0
	rescue := &Rescue{Store: f.st, DB: f.db.Pool, OrphansEvery: time.Hour, Logger: quiet, Rescued: func(n int) { rescued += n }}
	require.NoError(t, rescue.Round(ctx, l)) // the first round sweeps: x has no row
	require.Equal(t, map[string]bool{"ob": true, "oc": true}, runningOf(), "x's task given back by the sweep")

	// b and c die; c has a stand-in, b has none (its backup row is gone).
	f.exec(t, "UPDATE "+s+".nodes SET lease_expires_at = now() - interval '1 second' WHERE node_id IN ('b', 'c')")
	f.exec(t, "DELETE FROM "+s+".backups WHERE node_id = 'b'")
	require.NoError(t, rescue.Round(ctx, l))
	require.Equal(t, map[string]bool{"oc": true}, runningOf(), "b's task given back by the round; c's is its stand-in's to give back")

	rescue.lastOrphans = time.Time{} // the sweep is due
	require.NoError(t, rescue.Round(ctx, l))
	require.Empty(t, runningOf(), "the sweep gives back c's task too")
	require.Equal(t, 3, rescued)
}
