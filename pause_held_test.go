package pgsched_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
)

// TestPauseReachesClaimedTasks: the database stops claims and hand-overs
// of a paused kind, but a worker may already hold tasks of the kind it
// claimed before the pause, waiting for a handler. Once the worker has
// heard of the pause, none of them starts: they go back to the database
// (released) and wait there for the resume. Here one handler slot is
// taken by a task that blocks while the worker holds four claimed tasks
// of the kind about to be paused; the block ends only after the worker
// has logged the pause.
func TestPauseReachesClaimedTasks(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()

	blockStarted := make(chan struct{})
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	var heldStarts atomic.Int32
	heard := &pauseHeard{kind: "held", ch: make(chan struct{})}

	cfg := fastConfig(b.db.Schema)
	cfg.Concurrency = 1
	cfg.Prefetch = 8
	cfg.Logger = slog.New(heard)
	cfg.Handlers = map[string]pgsched.Handler{
		"block": pgsched.HandlerFunc(func(ctx context.Context, _ *pgsched.Job) error {
			close(blockStarted)
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}),
		"held": pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error {
			heldStarts.Add(1)
			return nil
		}),
	}
	outcomes := watchOutcomes(&cfg)
	startWorker(t, b.db, cfg)

	now := time.Now()
	_, err := b.client.Schedule(ctx, pgsched.Task{OrderingID: "blocker", ScheduledAt: now, Kind: "block"})
	require.NoError(t, err)
	select {
	case <-blockStarted:
	case <-time.After(pgtest.Patience(10 * time.Second)):
		t.Fatal("the blocking task did not start")
	}

	// Four tasks of the kind to pause, each its own ordering_id: the
	// worker claims them (it may hold 1 + 8) and they wait for the one
	// handler slot.
	var held []pgsched.Task
	for i := range 4 {
		held = append(held, pgsched.Task{OrderingID: fmt.Sprintf("held-%d", i), ScheduledAt: now, Kind: "held"})
	}
	_, err = b.client.ScheduleMany(ctx, held)
	require.NoError(t, err)
	eventually(t, 10*time.Second, func() bool {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(ctx,
			"SELECT count(*) FROM "+b.db.Schema+".heads WHERE kind = 'held' AND running").Scan(&n))
		return n == len(held)
	}, "the worker claims the four held tasks")

	fresh, err := b.client.PauseKind(ctx, "held")
	require.NoError(t, err)
	require.True(t, fresh)
	select {
	case <-heard.ch:
	case <-time.After(pgtest.Patience(10 * time.Second)):
		t.Fatal("the worker did not hear of the pause")
	}

	// The handler slot frees up. Every held task's run ends in an outcome
	// either way: released unstarted (the pause honoured) or completed.
	unblock()
	outcomes.waitFor(t, 10*time.Second, func(l *outcomeLog) bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		n := 0
		for _, o := range l.list {
			if o.Kind == "held" {
				n++
			}
		}
		return n >= len(held)
	}, "an outcome for each held task")
	outcomes.completed(t, 1, 10*time.Second) // the blocker
	require.Zero(t, heldStarts.Load(), "a task of a paused kind started")
	for i := range held {
		require.True(t, outcomes.has(fmt.Sprintf("held-%d", i), "release"), "held-%d given back", i)
	}
	var pending int
	require.NoError(t, b.db.Pool.QueryRow(ctx,
		"SELECT count(*) FROM "+b.db.Schema+".heads WHERE kind = 'held' AND NOT running").Scan(&pending))
	require.Equal(t, len(held), pending, "the held tasks wait in the database for the resume")
}

// pauseHeard is a log handler that closes ch when the worker logs that it
// heard of kind's pause.
type pauseHeard struct {
	kind string
	once sync.Once
	ch   chan struct{}
}

func (h *pauseHeard) Enabled(context.Context, slog.Level) bool { return true }

func (h *pauseHeard) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "kind paused: its tasks are not started" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "kind" && a.Value.String() == h.kind {
			h.once.Do(func() { close(h.ch) })
			return false
		}
		return true
	})
	return nil
}

func (h *pauseHeard) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *pauseHeard) WithGroup(string) slog.Handler      { return h }
