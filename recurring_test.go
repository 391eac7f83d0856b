package pgsched_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
)

// tickLog records every tick a handler ran: its schedule, tick time (from
// the uniqueness key), scheduled time and start and end.
type tickLog struct {
	mu   sync.Mutex
	runs []tickRun
}

type tickRun struct {
	name            string
	tick, scheduled time.Time
	payload         string
	started, ended  time.Time
}

func (l *tickLog) handler(t *testing.T) pgsched.Handler {
	return pgsched.HandlerFunc(func(_ context.Context, job *pgsched.Job) error {
		started := time.Now()
		tick, err := time.Parse(time.RFC3339, strings.TrimPrefix(job.UniquenessKey, "tick "))
		if err != nil {
			t.Errorf("tick %s has uniqueness_key %q", job.OrderingID, job.UniquenessKey)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.runs = append(l.runs, tickRun{name: job.OrderingID, tick: tick, scheduled: job.ScheduledAt,
			payload: string(job.Payload), started: started, ended: time.Now()})
		return nil
	})
}

func (l *tickLog) of(name string) []tickRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []tickRun
	for _, r := range l.runs {
		if r.name == name {
			out = append(out, r)
		}
	}
	return out
}

func recurringWorker(t *testing.T, b clientBundle, id string, l *tickLog, logs ...*syncLog) *pgsched.Worker {
	cfg := fastConfig(b.db.Schema)
	cfg.NodeID = id
	if len(logs) > 0 {
		cfg.Logger = slog.New(slog.NewTextHandler(logs[0], nil))
	}
	cfg.Handlers = map[string]pgsched.Handler{"*": l.handler(t)}
	return startWorker(t, b.db, cfg)
}

// TestRecurringTicksOnce: three nodes, five schedules ticking every
// second: every tick from the first to the last runs exactly once, ticks
// of one schedule in order and never overlapping, and the view says what
// ran last.
func TestRecurringTicksOnce(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	l := &tickLog{}
	for i := range 3 {
		// Ticks are made up to twice the lease TTL ahead: 6 s here, so a
		// slow round on a loaded server (Citus) still makes each tick
		// before its time, which this test asserts.
		cfg := fastConfig(b.db.Schema)
		cfg.NodeID = fmt.Sprint("rc-", i)
		cfg.LeaseTTL = 3 * time.Second
		cfg.Handlers = map[string]pgsched.Handler{"*": l.handler(t)}
		startWorker(t, b.db, cfg)
	}
	names := []string{"r0", "r1", "r2", "r3", "r4"}
	for _, n := range names {
		res, err := b.client.UpsertRecurring(ctx, pgsched.Recurring{Name: n, Spec: "@every 1s", Kind: "beat"})
		require.NoError(t, err)
		require.Equal(t, pgsched.Inserted, res)
	}
	for _, n := range names {
		eventually(t, 20*time.Second, func() bool { return len(l.of(n)) >= 4 }, "%s ticks", n)
	}
	for _, n := range names {
		runs := l.of(n)
		for i, r := range runs {
			if i == 0 && r.scheduled.After(r.tick) {
				// A new schedule's first tick is the next whole second
				// after the round that reads it; on a loaded machine (CI
				// under -race, the one-machine Citus cluster) it can pass
				// before that round writes it: it then runs at once, as
				// a catch-up. Later ticks are written seconds ahead.
				require.Less(t, r.scheduled.Sub(r.tick), 5*time.Second, "%s: a late first tick runs at once", n)
				continue
			}
			require.True(t, r.scheduled.Equal(r.tick), "%s: an on-time tick is scheduled at its time: run %d, tick %s, scheduled %s", n, i, r.tick, r.scheduled)
			require.Zero(t, r.tick.Nanosecond(), "@every 1s ticks on whole seconds")
			if i > 0 {
				require.Equal(t, time.Second, r.tick.Sub(runs[i-1].tick), "%s: ticks %s then %s: one missing or twice", n, runs[i-1].tick, r.tick)
				require.False(t, r.started.Before(runs[i-1].ended), "%s: ticks overlap", n)
			}
		}
	}
	list, err := b.client.ListRecurring(ctx)
	require.NoError(t, err)
	require.Len(t, list, 5)
	for _, r := range list {
		require.Equal(t, "@every 1s", r.Spec)
		require.False(t, r.NextRunAt.IsZero())
	}
}

// TestRecurringMissedTicks: the state an outage leaves (the schedule's
// next tick five ticks in the past, no node having created them) meets a
// starting node: skip runs none of the missed ticks, one runs one (the
// latest), all runs all five in order; every later tick runs on time.
func TestRecurringMissedTicks(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{pgsched.MissedSkip, pgsched.MissedOne, pgsched.MissedAll} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			b := setupClient(t)
			ctx := context.Background()
			_, err := b.client.UpsertRecurring(ctx, pgsched.Recurring{Name: "m", Spec: "@every 10s", Missed: policy})
			require.NoError(t, err)
			// A phase of the 10s grid where the last tick is at least 2s
			// old and the next at least 5s away, so which ticks were missed
			// is certain when the node starts right after.
			for phase := time.Since(time.Now().Truncate(10 * time.Second)); phase < 2*time.Second || phase > 5*time.Second; phase = time.Since(time.Now().Truncate(10 * time.Second)) {
				wait := time.NewTimer(100 * time.Millisecond) // the wall clock must move on; nothing else to wait for
				<-wait.C
			}
			last := time.Now().Truncate(10 * time.Second).UTC()
			first := last.Add(-40 * time.Second)
			_, err = b.db.Pool.Exec(ctx, "UPDATE "+b.db.Schema+".recurring_schedules SET next_tick = $1", first)
			require.NoError(t, err)
			l := &tickLog{}
			recurringWorker(t, b, "rm-"+policy, l)
			eventually(t, 20*time.Second, func() bool {
				for _, r := range l.of("m") {
					if r.tick.After(last) {
						return true
					}
				}
				return false
			}, "the next tick ran on time")
			var catchUps []time.Time
			for _, r := range l.of("m") {
				if r.tick.After(last) {
					require.True(t, r.scheduled.Equal(r.tick), "on time: tick %s scheduled %s (last %s)", r.tick, r.scheduled, last)
					continue
				}
				require.False(t, r.scheduled.Equal(r.tick), "a missed tick runs as a catch-up, now")
				catchUps = append(catchUps, r.tick)
			}
			switch policy {
			case pgsched.MissedSkip:
				require.Empty(t, catchUps)
			case pgsched.MissedOne:
				require.Equal(t, []time.Time{last}, catchUps)
			case pgsched.MissedAll:
				var want []time.Time
				for at := first; !at.After(last); at = at.Add(10 * time.Second) {
					want = append(want, at)
				}
				require.Len(t, want, 5)
				require.Equal(t, want, catchUps, "all five, in order")
			}
		})
	}
}

// TestRecurringPauseResumeUpdateDelete: each change takes effect from the
// next tick, from SQL and from Go: a paused schedule creates no ticks and
// drops the ones not yet due; resume starts again; a new spec and payload
// apply to every tick after the change; a deleted schedule ticks no more.
func TestRecurringPauseResumeUpdateDelete(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	s := b.db.Schema
	l := &tickLog{}
	logs := &syncLog{}
	recurringWorker(t, b, "rp-1", l, logs)
	_, err := b.db.Pool.Exec(ctx, "SELECT "+s+`.recurring_upsert('beat', '@every 1s', 'k', '{"v": 1}')`)
	require.NoError(t, err)
	// A schedule left alone: its ticks running shows ticks were made and
	// run while beat's were not.
	_, err = b.db.Pool.Exec(ctx, "SELECT "+s+".recurring_upsert('control', '@every 1s')")
	require.NoError(t, err)
	ticksAfter := func(name string, at time.Time) int {
		n := 0
		for _, r := range l.of(name) {
			if r.tick.After(at) {
				n++
			}
		}
		return n
	}
	eventually(t, 10*time.Second, func() bool { return len(l.of("beat")) >= 2 }, "ticking")

	var changed bool
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT "+s+".recurring_pause('beat')").Scan(&changed))
	require.True(t, changed)
	paused := time.Now()
	again, err := b.client.PauseRecurring(ctx, "beat")
	require.NoError(t, err)
	require.False(t, again, "already paused")
	var pending int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+s+".tasks WHERE ordering_id = 'beat' AND scheduled_at > now()").Scan(&pending))
	require.Zero(t, pending, "no tick left ahead")
	list, err := b.client.ListRecurring(ctx)
	require.NoError(t, err)
	require.True(t, list[0].Paused)
	// Three ticks of the control schedule with beat paused: none of
	// beat's runs.
	eventually(t, 10*time.Second, func() bool { return ticksAfter("control", paused) >= 3 }, "three ticks' time")
	require.Zero(t, ticksAfter("beat", paused), "ticks ran though paused at %s", paused)

	require.NotEmpty(t, logs.lines(`msg="recurring schedule paused" node_id=rp-1 schedule=beat`))
	resumed, err := b.client.ResumeRecurring(ctx, "beat")
	require.NoError(t, err)
	require.True(t, resumed)
	at := time.Now()
	eventually(t, 10*time.Second, func() bool {
		runs := l.of("beat")
		return len(runs) > 0 && runs[len(runs)-1].tick.After(at)
	}, "ticking again after the resume")

	res, err := b.client.UpsertRecurring(ctx, pgsched.Recurring{Name: "beat", Spec: "@every 2s", Kind: "k", Payload: []byte(`{"v": 2}`)})
	require.NoError(t, err)
	require.Equal(t, pgsched.Updated, res)
	updated := time.Now()
	eventually(t, 10*time.Second, func() bool {
		n := 0
		for _, r := range l.of("beat") {
			if r.tick.After(updated) {
				n++
			}
		}
		return n >= 2
	}, "two ticks under the new spec")
	require.NotEmpty(t, logs.lines(`msg="recurring schedule no longer paused (resumed or deleted)" node_id=rp-1 schedule=beat`))
	require.NotEmpty(t, logs.lines(`msg="recurring schedule (new, changed or resumed) ticks from now" node_id=rp-1 schedule=beat spec="@every 2s"`))
	for _, r := range l.of("beat") {
		if r.tick.After(updated) {
			require.Zero(t, r.tick.Unix()%2, "tick %s is not on the 2s grid", r.tick)
			require.JSONEq(t, `{"v": 2}`, r.payload)
		}
	}

	deleted, err := b.client.DeleteRecurring(ctx, "beat")
	require.NoError(t, err)
	require.True(t, deleted)
	gone := time.Now()
	_, err = b.client.PauseRecurring(ctx, "beat")
	require.ErrorIs(t, err, pgsched.ErrNotFound)
	eventually(t, 10*time.Second, func() bool { return ticksAfter("control", gone) >= 2 }, "two ticks' time")
	require.Zero(t, ticksAfter("beat", gone), "ticks ran after the delete at %s", gone)
	list, err = b.client.ListRecurring(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "control", list[0].Name, "beat is gone")
}

// TestRecurringTicksAreMarked: ticks are the tasks recurring_materialize
// marks, not whatever has a tick-like key. A task a user enqueues under a
// schedule's name, with a key shaped like a tick's, survives the
// schedule's pause (which drops its pending ticks) and is not shown as
// its next tick; the ticks themselves go.
func TestRecurringTicksAreMarked(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	s := b.db.Schema
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := b.db.Pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	exec("SELECT " + s + ".recurring_upsert('nightly', '0 3 * * *')")
	t1 := time.Date(2099, 1, 1, 3, 0, 0, 0, time.UTC)
	t2 := t1.Add(24 * time.Hour)
	var created int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT "+s+".recurring_materialize('nightly', NULL, $1, ARRAY[$2, $3]::timestamptz[])",
		t2.Add(24*time.Hour), t1, t2).Scan(&created))
	require.Equal(t, 2, created)
	_, err := b.client.Schedule(ctx, pgsched.Task{OrderingID: "nightly", ScheduledAt: t1.Add(-time.Hour),
		UniquenessKey: "tick 2099-01-01T02:00:00Z"})
	require.NoError(t, err)
	var ticks int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+s+".heads WHERE ordering_id = 'nightly' AND tick").Scan(&ticks))
	var backlogTicks int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+s+".backlog WHERE ordering_id = 'nightly' AND tick").Scan(&backlogTicks))
	require.Equal(t, 2, ticks+backlogTicks, "the two ticks are marked, wherever they sit")
	var next time.Time
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT next_run_at FROM "+s+".recurring WHERE name = 'nightly'").Scan(&next))
	require.True(t, next.Equal(t1), "the next tick is the first tick, not the user's earlier task: %s", next)

	exec("SELECT " + s + ".recurring_pause('nightly')")
	tasks, err := b.client.ListTasks(ctx, pgsched.TaskFilter{OrderingID: "nightly"})
	require.NoError(t, err)
	require.Len(t, tasks, 1, "the ticks are dropped, the user's task stays")
	require.Equal(t, "tick 2099-01-01T02:00:00Z", tasks[0].UniquenessKey)
}
