package pgsched_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
)

// TestRecurringExactlyOnceAcrossProcesses: 20 schedules tick every second
// on three worker processes; one worker is SIGKILLed, and later the
// leader. Ticks run in a transactional handler that logs each run in the
// transaction recording its completion, so the log is what committed.
// Every tick from each schedule's first to its last ran exactly once, in
// order, and ticks of one schedule never overlapped; each schedule's ticks
// go on past both kills, to ticks only the new leader can have made.
func TestRecurringExactlyOnceAcrossProcesses(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	createExecLog(t, b.db)
	const schedules = 20
	for i := range schedules {
		_, err := b.client.UpsertRecurring(ctx, pgsched.Recurring{Name: fmt.Sprintf("s%02d", i), Spec: "@every 1s", Kind: "tx"})
		require.NoError(t, err)
	}
	children := map[string]*child{}
	for _, id := range []string{"re-1", "re-2", "re-3"} {
		children[id] = startChild(t, b.db, id, 0, 8, 2*time.Second)
	}
	began := time.Now()
	leader := func() string {
		var id string
		err := b.db.Pool.QueryRow(ctx, "SELECT node_id FROM "+b.db.Schema+".cluster WHERE leader").Scan(&id)
		if err != nil {
			return ""
		}
		return id
	}
	// ranPast reports whether every schedule has run a tick after at.
	ranPast := func(at time.Time) bool {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(DISTINCT ordering_id) FROM "+b.db.Schema+".execlog WHERE uk > $1",
			"tick "+at.UTC().Format(time.RFC3339)).Scan(&n))
		return n == schedules
	}

	eventually(t, 30*time.Second, func() bool { return ranPast(began) && leader() != "" }, "every schedule ticks, under a leader")
	lead := leader()
	for id, c := range children {
		if id != lead {
			require.NoError(t, c.cmd.Process.Kill(), "SIGKILL %s", id)
			t.Logf("SIGKILLed worker %s at %s", id, time.Since(began).Round(time.Millisecond))
			delete(children, id)
			break
		}
	}
	// Ticks go on past the dead worker's lease.
	past := time.Now().Add(childTTL)
	eventually(t, 30*time.Second, func() bool { return ranPast(past) }, "ticks after the worker's death")
	lead = leader()
	require.Contains(t, children, lead, "the leader is a live child")
	require.NoError(t, children[lead].cmd.Process.Kill())
	leaderKilled := time.Now()
	t.Logf("SIGKILLed the leader %s at %s", lead, time.Since(began).Round(time.Millisecond))
	delete(children, lead)
	// The dead leader made ticks up to two lease TTLs ahead of its last
	// round: ticks past that (and a second for rounding) are the new
	// leader's.
	newLeaders := leaderKilled.Add(2*childTTL + time.Second)
	eventually(t, 30*time.Second, func() bool { return ranPast(newLeaders) }, "ticks the new leader made")

	for i := range schedules {
		_, err := b.client.PauseRecurring(ctx, fmt.Sprintf("s%02d", i))
		require.NoError(t, err)
	}
	eventually(t, 30*time.Second, func() bool {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+b.db.Schema+".tasks").Scan(&n))
		return n == 0
	}, "every tick created has run")

	rows, err := b.db.Pool.Query(ctx, "SELECT ordering_id, uk, started, ended FROM "+b.db.Schema+".execlog ORDER BY ordering_id, uk")
	require.NoError(t, err)
	type run struct {
		o, uk          string
		started, ended time.Time
	}
	byName := map[string][]run{}
	for rows.Next() {
		var r run
		require.NoError(t, rows.Scan(&r.o, &r.uk, &r.started, &r.ended))
		byName[r.o] = append(byName[r.o], r)
	}
	require.NoError(t, rows.Err())
	require.Len(t, byName, schedules)
	total := 0
	for name, runs := range byName {
		var prev time.Time
		for i, r := range runs {
			tick, err := time.Parse(time.RFC3339, strings.TrimPrefix(r.uk, "tick "))
			require.NoError(t, err)
			if i > 0 {
				require.Equal(t, time.Second, tick.Sub(prev), "%s: after tick %s came %s (one missing or twice)", name, prev, tick)
				require.False(t, r.started.Before(runs[i-1].ended), "%s: ticks %s and %s overlap", name, prev, tick)
			}
			prev = tick
		}
		require.True(t, prev.After(newLeaders), "%s: its last tick %s is one the new leader made", name, prev)
		total += len(runs)
	}
	var completions int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+b.db.Schema+".completions").Scan(&completions))
	require.Equal(t, total, completions, "one completion per logged run")
	t.Logf("%d ticks ran once each over %d schedules", total, schedules)
}

// TestRecurringLongOutage: a schedule ticking every second, its next tick
// 20 days in the past (over a million missed ticks): the starting node
// does not walk them all; policy all runs the latest 100, consecutive, in
// order, and on-time ticks follow.
func TestRecurringLongOutage(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	_, err := b.client.UpsertRecurring(ctx, pgsched.Recurring{Name: "long", Spec: "@every 1s", Missed: pgsched.MissedAll})
	require.NoError(t, err)
	_, err = b.db.Pool.Exec(ctx, "UPDATE "+b.db.Schema+".recurring_schedules SET next_tick = date_trunc('second', now()) - interval '20 days'")
	require.NoError(t, err)
	l := &tickLog{}
	recurringWorker(t, b, "rl-1", l)
	eventually(t, 20*time.Second, func() bool {
		for _, r := range l.of("long") {
			if r.scheduled.Equal(r.tick) {
				return true
			}
		}
		return false
	}, "an on-time tick ran")
	var catchUps []time.Time
	for _, r := range l.of("long") {
		if !r.scheduled.Equal(r.tick) {
			catchUps = append(catchUps, r.tick)
		}
	}
	// The latest MaxCatchUp; a tick or two more when the round computing
	// them (a million steps, slow under -race) let the next fall behind.
	require.GreaterOrEqual(t, len(catchUps), 100, "the latest MaxCatchUp missed ticks")
	require.LessOrEqual(t, len(catchUps), 105, "not the million before them")
	for i := 1; i < len(catchUps); i++ {
		require.Equal(t, time.Second, catchUps[i].Sub(catchUps[i-1]), "consecutive, in order")
	}
	require.WithinDuration(t, time.Now(), catchUps[len(catchUps)-1], pgtest.Patience(10*time.Second), "the latest ones")
}

// TestRecurringSetAsideNeverBlocks: 1,100 schedules whose ticks cannot be
// created (more than a leader's round takes: rows written before upserts
// refused them, or by hand, with a zone no worker can count on, a spec
// that does not parse, a payload schedule refuses) and one that works,
// written last. The one that works ticks on time; each failing one is set
// aside, shown in the view with its error, counted by the metric and
// logged once.
func TestRecurringSetAsideNeverBlocks(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	const bad = 1100
	_, err := b.db.Pool.Exec(ctx, "INSERT INTO "+b.db.Schema+`.recurring_schedules (name, spec, time_zone, payload)
		SELECT format('bad-%s', i),
		       CASE i % 3 WHEN 1 THEN '61 * * * *' ELSE '@every 1s' END,
		       CASE i % 3 WHEN 0 THEN 'posix/Europe/Berlin' ELSE 'UTC' END,
		       CASE i % 3 WHEN 2 THEN (repeat('[', 127) || repeat(']', 127))::jsonb ELSE '{}' END
		FROM generate_series(1, $1) AS i`, bad)
	require.NoError(t, err)
	_, err = b.client.UpsertRecurring(ctx, pgsched.Recurring{Name: "healthy", Spec: "@every 1s", Kind: "beat"})
	require.NoError(t, err)

	l := &tickLog{}
	logs := &syncLog{}
	reg := prometheus.NewRegistry()
	cfg := fastConfig(b.db.Schema)
	cfg.NodeID = "rs-1"
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	cfg.Registerer = reg
	cfg.Handlers = map[string]pgsched.Handler{"*": l.handler(t)}
	startWorker(t, b.db, cfg)

	setAside := func() int {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+b.db.Schema+".recurring WHERE error IS NOT NULL AND failing_since IS NOT NULL").Scan(&n))
		return n
	}
	ticksAfter := func(at time.Time) int {
		n := 0
		for _, r := range l.of("healthy") {
			if r.tick.After(at) {
				n++
			}
		}
		return n
	}
	eventually(t, 20*time.Second, func() bool { return ticksAfter(time.Time{}) >= 5 }, "the schedule that works ticks")
	eventually(t, 30*time.Second, func() bool { return setAside() == bad }, "every failing schedule set aside")
	all := time.Now()
	eventually(t, 20*time.Second, func() bool { return ticksAfter(all) >= 3 }, "the schedule that works ticks on")
	runs := l.of("healthy")
	for i, r := range runs {
		if i == 0 {
			continue // a new schedule's first tick may run as a catch-up (see TestRecurringTicksOnce)
		}
		require.True(t, r.scheduled.Equal(r.tick), "on time, not a catch-up: tick %s scheduled %s", r.tick, r.scheduled)
		require.Equal(t, time.Second, r.tick.Sub(runs[i-1].tick), "none missed: %s then %s", runs[i-1].tick, r.tick)
	}

	// The view says why, for each.
	rows, err := b.db.Pool.Query(ctx, "SELECT name, error FROM "+b.db.Schema+".recurring WHERE name LIKE 'bad-%'")
	require.NoError(t, err)
	why := map[string]int{}
	for rows.Next() {
		var name, e string
		require.NoError(t, rows.Scan(&name, &e))
		switch {
		case strings.Contains(e, `unknown time zone "posix/Europe/Berlin"`):
			why["zone"]++
		case strings.Contains(e, `minute field "61": value 61 out of range 0-59`):
			why["spec"]++
		case strings.Contains(e, "payload is nested more than 126 levels deep"):
			why["payload"]++
		default:
			t.Errorf("%s: error %q", name, e)
		}
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]int{"zone": 366, "spec": 367, "payload": 367}, why) // i % 3 over 1..1100
	list, err := b.client.ListRecurring(ctx)
	require.NoError(t, err)
	for _, r := range list {
		if r.Name == "healthy" {
			require.Empty(t, r.Error)
			require.True(t, r.FailingSince.IsZero())
		} else {
			require.NotEmpty(t, r.Error, r.Name)
			require.False(t, r.FailingSince.IsZero(), r.Name)
		}
	}

	// Logged once each, through all the rounds since.
	lines := logs.lines(`msg="recurring schedule set aside`)
	perSchedule := map[string]int{}
	for _, line := range lines {
		_, rest, ok := strings.Cut(line, " schedule=")
		require.True(t, ok, line)
		name, _, _ := strings.Cut(rest, " ")
		perSchedule[name]++
	}
	require.Len(t, perSchedule, bad, "every one logged")
	for name, n := range perSchedule {
		require.Equal(t, 1, n, "%s logged %d times", name, n)
	}
	require.Len(t, lines, bad)
	for _, line := range logs.lines("level=WARN") {
		if strings.Contains(line, "recurring") || strings.Contains(line, "schedule=") {
			require.Contains(t, line, "recurring schedule set aside", "no other warning about schedules: %s", line)
		}
	}

	// The metric counts them.
	eventually(t, 10*time.Second, func() bool {
		families, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range families {
			if f.GetName() == "pgsched_recurring_set_aside" {
				return f.GetMetric()[0].GetGauge().GetValue() == bad
			}
		}
		return false
	}, "pgsched_recurring_set_aside is %d", bad)
}
