package lease

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLeavingLeaderResigns: a leader whose node has begun a clean stop
// resigns at its next round (events report "resigned", the leader row is
// gone) instead of losing the lease the database refuses a leaving node.
func TestLeavingLeaderResigns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	n, _ := f.runNode(t, "leaving-1")
	var lost []string
	l, err := NewLeader(LeaderConfig{
		Node: n, Store: f.st, DB: f.db.Pool, TTL: time.Hour, Interval: time.Minute,
		Events: LeaderEvents{Lost: func(_ int64, reason string) { lost = append(lost, reason) }},
	})
	require.NoError(t, err)
	ctx := context.Background()
	l.step(ctx)
	require.NotZero(t, l.Current().Term, "the only node leads")

	require.NoError(t, n.Leave(ctx))
	l.step(ctx)
	require.Zero(t, l.Current().Term)
	require.Equal(t, []string{"resigned"}, lost, "resigned, not lost")
	var leaders int
	require.NoError(t, f.db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+f.db.Schema+".leader").Scan(&leaders))
	require.Zero(t, leaders, "the leader row is gone, so another node takes over at once")
}
