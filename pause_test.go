package pgsched_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
)

// starts records when each task started, by kind, and how often.
type starts struct {
	mu    sync.Mutex
	at    map[string][]time.Time // kind -> start times
	count map[string]int         // ordering_id/scheduled_at -> runs
}

func newStarts() *starts {
	return &starts{at: map[string][]time.Time{}, count: map[string]int{}}
}

func (s *starts) handler() pgsched.Handler {
	return pgsched.HandlerFunc(func(_ context.Context, job *pgsched.Job) error {
		s.mu.Lock()
		s.at[job.Kind] = append(s.at[job.Kind], time.Now())
		s.count[job.OrderingID+"/"+job.ScheduledAt.String()]++
		s.mu.Unlock()
		return nil
	})
}

func (s *starts) after(kind string, t time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, at := range s.at[kind] {
		if at.After(t) {
			n++
		}
	}
	return n
}

func (s *starts) total(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.at[kind])
}

// TestPauseKind: three nodes run two kinds, each in chains of tasks per
// ordering_id (so finishes hand successors over). Once a pause of one kind
// commits, no task of it starts on any node (after the moment a node needs
// to hear of it), while the other kind flows; a node started while the
// kind is paused does not run it either; resume runs every waiting task
// exactly once.
func TestPauseKind(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	s := newStarts()
	var outcomes *outcomeLog
	start := func(id string) *pgsched.Worker {
		cfg := fastConfig(b.db.Schema)
		cfg.NodeID = id
		cfg.Handlers = map[string]pgsched.Handler{"*": s.handler()}
		if outcomes == nil {
			outcomes = watchOutcomes(&cfg)
		} else {
			pgsched.SetOnOutcome(&cfg, outcomes.record)
		}
		return startWorker(t, b.db, cfg)
	}
	workers := []*pgsched.Worker{start("pa-1"), start("pa-2"), start("pa-3")}

	// 3 s of work for each kind: 30 ordering_ids each, a task every 100ms.
	now := time.Now()
	var tasks []pgsched.Task
	for _, kind := range []string{"p", "q"} {
		for o := range 30 {
			for i := range 30 {
				tasks = append(tasks, pgsched.Task{OrderingID: fmt.Sprintf("%s-%02d", kind, o), Kind: kind,
					ScheduledAt: now.Add(time.Duration(i) * 100 * time.Millisecond)})
			}
		}
	}
	_, err := b.client.ScheduleMany(ctx, tasks)
	require.NoError(t, err)
	eventually(t, 10*time.Second, func() bool { return s.total("p") >= 60 }, "p runs before the pause")

	fresh, err := b.client.PauseKind(ctx, "p")
	require.NoError(t, err)
	require.True(t, fresh)
	paused := time.Now()
	again, err := b.client.PauseKind(ctx, "p")
	require.NoError(t, err)
	require.False(t, again, "already paused")

	// The nodes hear of it by NOTIFY (a maintenance round at worst); give
	// them a second, then nothing of p may start.
	heard := paused.Add(time.Second)
	qBefore := s.after("q", heard)
	eventually(t, 10*time.Second, func() bool { return s.after("q", heard) >= qBefore+100 }, "q keeps flowing")
	require.Zero(t, s.after("p", heard), "no p starts once the pause is known")

	kinds, err := b.client.PausedKinds(ctx)
	require.NoError(t, err)
	require.Len(t, kinds, 1)
	require.Equal(t, "p", kinds[0].Kind)
	// Idle heads were marked by the pause; heads running then, given back
	// or promoted since are marked by the leader's sweep.
	eventually(t, 15*time.Second, func() bool {
		var waiting int
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT waiting_heads FROM "+b.db.Schema+".paused WHERE kind = 'p'").Scan(&waiting))
		return waiting == 30
	}, "every p head is out of the claim index")

	// Every node restarts while p is paused: still nothing of p.
	for _, w := range workers {
		require.NoError(t, w.Stop(ctx))
	}
	restarted := time.Now()
	start("pa-4")
	eventually(t, 10*time.Second, func() bool {
		left, err := b.client.ListTasks(ctx, pgsched.TaskFilter{Kind: "q", Limit: 1})
		require.NoError(t, err)
		return len(left) == 0
	}, "q finishes on the restarted node")
	require.Zero(t, s.after("p", restarted), "a node started while p is paused does not run it")

	resumed, err := b.client.ResumeKind(ctx, "p")
	require.NoError(t, err)
	require.True(t, resumed)
	eventually(t, 20*time.Second, func() bool { return s.total("p") == 900 }, "every p task runs after the resume (%d of 900)", s.total("p"))
	s.mu.Lock()
	for key, n := range s.count {
		require.Equal(t, 1, n, "%s ran %d times", key, n)
	}
	s.mu.Unlock()
	outcomes.completed(t, 1800, 20*time.Second) // every outcome recorded, not only every handler run
	require.Equal(t, 1800, countRows(t, b, "completions"))
	again, err = b.client.ResumeKind(ctx, "p")
	require.NoError(t, err)
	require.False(t, again, "not paused any more")
}

// TestPauseFromSQL: the SQL functions are the same API: bad kinds are
// refused, heads enqueued after the pause are marked by pause_sweep, and
// resume_kind puts every marked head back.
func TestPauseFromSQL(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	s := b.db.Schema
	var ok bool
	for _, bad := range []string{"''", "NULL", "repeat('k', 256)"} {
		_, err := b.db.Pool.Exec(ctx, "SELECT "+s+".pause_kind("+bad+")")
		require.ErrorContains(t, err, "kind", bad)
	}
	_, err := b.client.PauseKind(ctx, "")
	require.ErrorIs(t, err, pgsched.ErrInvalidTask)

	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT "+s+".pause_kind('k')").Scan(&ok))
	require.True(t, ok)
	_, err = b.client.ScheduleMany(ctx, []pgsched.Task{
		{OrderingID: "a", ScheduledAt: time.Now(), Kind: "k"},
		{OrderingID: "b", ScheduledAt: time.Now(), Kind: "other"},
	})
	require.NoError(t, err)
	marked := func() int {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+s+".heads WHERE paused").Scan(&n))
		return n
	}
	require.Equal(t, 0, marked(), "enqueued after the pause: not marked yet")
	var changed int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT "+s+".pause_sweep()").Scan(&changed))
	require.Equal(t, 1, changed)
	require.Equal(t, 1, marked())

	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT "+s+".resume_kind('k')").Scan(&ok))
	require.True(t, ok)
	require.Equal(t, 0, marked())
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT "+s+".resume_kind('k')").Scan(&ok))
	require.False(t, ok)

	// A head marked while its kind is paused and overwritten with another
	// kind goes back into line.
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT "+s+".pause_kind('k')").Scan(&ok))
	require.Equal(t, 1, marked())
	at := time.Now().Add(time.Hour)
	_, err = b.client.Schedule(ctx, pgsched.Task{OrderingID: "c", ScheduledAt: at, Kind: "k"})
	require.NoError(t, err)
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT "+s+".pause_sweep()").Scan(&changed))
	require.Equal(t, 0, changed, "not due within the sweep's horizon")
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT "+s+".pause_kind('k')").Scan(&ok))
	require.Equal(t, 2, marked(), "pause_kind marks every idle head of the kind")
	res, err := b.client.Schedule(ctx, pgsched.Task{OrderingID: "c", ScheduledAt: at, Kind: "other"})
	require.NoError(t, err)
	require.Equal(t, pgsched.Updated, res)
	require.Equal(t, 1, marked(), "the overwritten head left the pause with its kind")
}
