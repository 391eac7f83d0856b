package pgsched_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
)

// TestViews: what psql users see in pgsched.pending, running, dead and
// lateness matches what the scheduler holds.
func TestViews(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	s := b.db.Schema
	now := time.Now()

	// Due tasks and nobody working: lateness shows the oldest.
	for _, id := range []string{"late-1", "late-2", "late-3"} {
		_, err := b.client.Schedule(ctx, pgsched.Task{OrderingID: id, ScheduledAt: now.Add(-time.Second), Kind: "late"})
		require.NoError(t, err)
	}
	var dueQueues int
	var lateness time.Duration
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT due_queues, lateness FROM "+s+".lateness").Scan(&dueQueues, &lateness))
	require.Equal(t, 3, dueQueues)
	require.GreaterOrEqual(t, lateness, 900*time.Millisecond)

	for i := range 5 {
		_, err := b.client.Schedule(ctx, pgsched.Task{OrderingID: "future", ScheduledAt: now.Add(time.Hour + time.Duration(i)*time.Second), Kind: "later"})
		require.NoError(t, err)
	}
	_, err := b.client.Schedule(ctx, pgsched.Task{OrderingID: "blocker", ScheduledAt: now, Kind: "block"})
	require.NoError(t, err)
	_, err = b.client.Schedule(ctx, pgsched.Task{OrderingID: "doomed", ScheduledAt: now, Kind: "die"})
	require.NoError(t, err)

	release := make(chan struct{})
	defer close(release)
	cfg := fastConfig(s)
	cfg.NodeID = "views-node"
	cfg.Handlers = map[string]pgsched.Handler{
		"late": pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error { return nil }),
		"block": pgsched.HandlerFunc(func(ctx context.Context, _ *pgsched.Job) error {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}),
		"die": pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error { return pgsched.Permanent(errors.New("bad payload")) }),
	}
	startWorker(t, b.db, cfg)

	eventually(t, 10*time.Second, func() bool { return countRows(t, b, "running") == 1 && countRows(t, b, "dead") == 1 }, "blocker runs, doomed is dead")
	var node, kind string
	var live bool
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT node_id, kind, lease_live FROM "+s+".running").Scan(&node, &kind, &live))
	require.Equal(t, "views-node", node)
	require.Equal(t, "block", kind)
	require.True(t, live)

	var lastError string
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT kind, last_error FROM "+s+".dead").Scan(&kind, &lastError))
	require.Equal(t, "die", kind)
	require.Contains(t, lastError, "bad payload")

	var pending, due int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT sum(pending), sum(due) FROM "+s+".pending WHERE kind = 'later'").Scan(&pending, &due))
	require.Equal(t, 5, pending)
	require.Zero(t, due)
	eventually(t, 10*time.Second, func() bool {
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT due_queues FROM "+s+".lateness").Scan(&dueQueues))
		return dueQueues == 0
	}, "nothing left due once the worker caught up")
}
