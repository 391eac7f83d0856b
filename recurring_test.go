package pgsched_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
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

// TestRecurringSpecParity: SQL's recurring_spec_error accepts and refuses
// exactly what the Go parser does, with the same message.
func TestRecurringSpecParity(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	specs := []string{
		"* * * * *", "30 2 * * *", "15 30 2 * * *", "0 0 29 2 *", "0 0 31 * *", "*/15 * * * *", "0 9 * * MON-FRI",
		"0 0 13 * FRI", "0 0 1 JAN,jul *", "0 0 * * 7", "5/15 * * * *", "1-10/3 * * * *", "0 0 30 2 *",
		"@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually", "@HOURLY", "@every 1s", "@every 1h30m",
		"@every 90s", "@every 1.5h", "@every +5m",
		"", "   ", "* * * *", "* * * * * * *", "61 * * * *", "* 24 * * *", "* * 0 * *", "* * 32 * *", "* * * 13 *",
		"* * * * 8", "*/0 * * * *", "*/61 * * * *", "*,5 * * * *", "5-1 * * * *", "FRI-MON * * * *", "* * * * FRI-MON",
		"1,,2 * * * *", "0 0 L * *", "0 0 * * 5#3", "0 0 ? * *", "a * * * *", "-5 * * * *", "5- * * * *", "1/ * * * *",
		"1/x * * * *", "1-2-3 * * * *", "00001 * * * *", "@every", "@every 500ms", "@every 1.5s", "@every -1s", "@every 0",
		"@every 1x", "@every 1s 2s", "@daily 5", "@sometimes", "*/5,10 * * * *", "* * * JANUARY *",
	}
	for _, spec := range specs {
		var goMsg string
		if err := (pgsched.Recurring{Name: "x", Spec: spec}).Check(); err != nil {
			goMsg = strings.TrimPrefix(err.Error(), "invalid task: recurring schedule: spec: ")
		}
		var sqlMsg *string
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT "+b.db.Schema+".recurring_spec_error($1)", spec).Scan(&sqlMsg))
		got := ""
		if sqlMsg != nil {
			got = *sqlMsg
		}
		require.Equal(t, goMsg, got, "spec %q", spec)
	}
}

// TestRecurringBadInput: every invalid field is refused by SQL and by Go
// (before the round trip where Check can tell) with the same message naming
// it, and nothing is stored. A schedule's kind and payload are refused in
// the words schedule uses, as schedule would refuse them in every tick.
func TestRecurringBadInput(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	deep := func(depth int, open, close, inner string) json.RawMessage {
		return json.RawMessage(strings.Repeat(open, depth) + inner + strings.Repeat(close, depth))
	}
	good := pgsched.Recurring{Name: "a", Spec: "@daily"}
	with := func(f func(*pgsched.Recurring)) pgsched.Recurring { r := good; f(&r); return r }
	for _, tc := range []struct {
		name string
		r    pgsched.Recurring
		msg  string // after "recurring schedule: "
		// goOnly: SQL cannot be given it (not text or jsonb PostgreSQL
		// holds). server: only the server can tell (Check passes).
		// task: schedule refuses the same kind and payload in these words.
		goOnly, server, task bool
	}{
		{name: "no name", r: with(func(r *pgsched.Recurring) { r.Name = "" }), msg: "name is required"},
		{name: "long name", r: with(func(r *pgsched.Recurring) { r.Name = strings.Repeat("n", 256) }), msg: "name is 256 bytes, over the limit of 255"},
		{name: "NUL in name", r: with(func(r *pgsched.Recurring) { r.Name = "a\x00" }), goOnly: true, msg: "name contains a NUL byte"},
		{name: "name not UTF-8", r: with(func(r *pgsched.Recurring) { r.Name = "a\xff" }), goOnly: true, msg: "name is not valid UTF-8"},
		{name: "bad spec", r: with(func(r *pgsched.Recurring) { r.Spec = "61 * * * *" }), msg: `spec: minute field "61": value 61 out of range 0-59`},
		{name: "unknown zone", r: with(func(r *pgsched.Recurring) { r.TimeZone = "Mars/Olympus" }), msg: `time_zone "Mars/Olympus" is not an IANA time zone name`},
		{name: "Local", r: with(func(r *pgsched.Recurring) { r.TimeZone = "Local" }), msg: `time_zone "Local" is not an IANA time zone name`},
		{name: "posix zone", r: with(func(r *pgsched.Recurring) { r.TimeZone = "posix/Europe/Berlin" }), msg: `time_zone "posix/Europe/Berlin" is not an IANA time zone name`},
		{name: "right zone", r: with(func(r *pgsched.Recurring) { r.TimeZone = "right/UTC" }), msg: `time_zone "right/UTC" is not an IANA time zone name`},
		{name: "localtime", r: with(func(r *pgsched.Recurring) { r.TimeZone = "localtime" }), msg: `time_zone "localtime" is not an IANA time zone name`},
		{name: "zone in lowercase", r: with(func(r *pgsched.Recurring) { r.TimeZone = "europe/berlin" }), msg: `time_zone "europe/berlin" is not an IANA time zone name`},
		{name: "zone as a path", r: with(func(r *pgsched.Recurring) { r.TimeZone = "../etc/passwd" }), msg: `time_zone "../etc/passwd" is not an IANA time zone name`},
		{name: "zone with a newline", r: with(func(r *pgsched.Recurring) { r.TimeZone = "Europe/Berlin\n" }), msg: "time_zone contains a control character"},
		{name: "zone with NUL", r: with(func(r *pgsched.Recurring) { r.TimeZone = "UTC\x00" }), goOnly: true, msg: "time_zone contains a NUL byte"},
		{name: "bad policy", r: with(func(r *pgsched.Recurring) { r.Missed = "twice" }), msg: `missed must be skip, one or all, got "twice"`},
		{name: "kind with a tab", r: with(func(r *pgsched.Recurring) { r.Kind = "email\tsend" }), task: true, msg: "kind contains a control character"},
		{name: "kind with DEL", r: with(func(r *pgsched.Recurring) { r.Kind = "k\x7f" }), task: true, msg: "kind contains a control character"},
		{name: "long kind", r: with(func(r *pgsched.Recurring) { r.Kind = strings.Repeat("k", 300) }), task: true, msg: "kind is 300 bytes, over the limit of 255"},
		{name: "NUL in kind", r: with(func(r *pgsched.Recurring) { r.Kind = "k\x00" }), goOnly: true, msg: "kind contains a NUL byte"},
		{name: "payload 127 arrays deep", r: with(func(r *pgsched.Recurring) { r.Payload = deep(127, "[", "]", "") }), task: true,
			msg: "payload is nested more than 126 levels deep"},
		{name: "payload 127 objects deep", r: with(func(r *pgsched.Recurring) { r.Payload = deep(126, `{"k":`, "}", "{}") }), task: true,
			msg: "payload is nested more than 126 levels deep"},
		{name: "payload 127 deep, mixed, in a larger document", r: with(func(r *pgsched.Recurring) {
			r.Payload = json.RawMessage(`{"pad":"` + strings.Repeat("p", 5000) + `","deep":` + string(deep(63, `[{"a":1,"b":`, "}]", `"x"`)) + `}`)
		}), task: true, msg: "payload is nested more than 126 levels deep"},
		{name: "payload over the size limit", r: with(func(r *pgsched.Recurring) { r.Payload = json.RawMessage(`"` + strings.Repeat("a", 1<<20) + `"`) }),
			server: true, task: true, msg: "payload is 1048588 bytes as stored (jsonb), over the limit of 1048576 bytes"},
		{name: "payload not JSON", r: with(func(r *pgsched.Recurring) { r.Payload = json.RawMessage(`{nope`) }), goOnly: true,
			msg: "payload is not valid JSON (at byte 2: invalid character 'n' looking for beginning of object key string)"},
		{name: "payload with \\u0000", r: with(func(r *pgsched.Recurring) { r.Payload = json.RawMessage(`{"a":"x\u0000"}`) }), goOnly: true,
			msg: `payload has a \u0000 escape, which jsonb cannot store`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const prefix = "recurring schedule: "
			checkErr := tc.r.Check()
			if tc.server {
				require.NoError(t, checkErr, "only the server tells")
			} else {
				require.ErrorIs(t, checkErr, pgsched.ErrInvalidTask)
				require.Equal(t, "invalid task: "+prefix+tc.msg, checkErr.Error())
			}
			_, err := b.client.UpsertRecurring(ctx, tc.r)
			require.ErrorIs(t, err, pgsched.ErrInvalidTask)
			require.True(t, strings.HasSuffix(err.Error(), prefix+tc.msg), "Go: %v", err)
			if tc.goOnly {
				return
			}
			var payload *string
			if tc.r.Payload != nil {
				payload = ptr(string(tc.r.Payload))
			}
			_, err = b.db.Pool.Exec(ctx, "SELECT "+b.db.Schema+".recurring_upsert($1, $2, $3, $4::jsonb, $5, $6)",
				tc.r.Name, tc.r.Spec, tc.r.Kind, payload, tc.r.TimeZone, tc.r.Missed)
			var pgErr *pgconn.PgError
			require.True(t, errors.As(err, &pgErr), "%v", err)
			require.Equal(t, "PGS01", pgErr.Code)
			require.Equal(t, "pgsched: "+prefix+tc.msg, pgErr.Message)
			if tc.task {
				_, err = b.db.Pool.Exec(ctx, "SELECT "+b.db.Schema+".schedule('o', now() + interval '1 hour', '', $1::jsonb, $2)",
					payload, tc.r.Kind)
				require.True(t, errors.As(err, &pgErr), "%v", err)
				require.Equal(t, "PGS01", pgErr.Code)
				require.Equal(t, "pgsched: "+tc.msg, pgErr.Message, "schedule's words")
			}
		})
	}
	require.Equal(t, 0, countRows(t, b, "recurring_schedules"), "nothing stored")
	require.Equal(t, 0, countTasks(t, b), "nothing stored")
	// The deepest payload schedule takes, a schedule takes too.
	_, err := b.client.UpsertRecurring(ctx, with(func(r *pgsched.Recurring) { r.Payload = deep(126, "[", "]", "") }))
	require.NoError(t, err)
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
	// Three ticks' time with the schedule paused: none of them runs.
	before := len(l.of("beat"))
	marker := time.NewTimer(3 * time.Second) // the ticks must fall due; nothing else to wait for
	<-marker.C
	for _, r := range l.of("beat")[before:] {
		require.False(t, r.tick.After(paused), "tick %s ran though paused at %s", r.tick, paused)
	}

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
	marker = time.NewTimer(2500 * time.Millisecond) // a tick's time and more; nothing else to wait for
	<-marker.C
	for _, r := range l.of("beat") {
		require.False(t, r.tick.After(gone), "tick %s ran after the delete", r.tick)
	}
	list, err = b.client.ListRecurring(ctx)
	require.NoError(t, err)
	require.Empty(t, list)
}

// TestRecurringExactlyOnceAcrossProcesses: 20 schedules tick every second
// for 30 s on three worker processes; one worker is SIGKILLed, and later
// the leader. Ticks run in a transactional handler that logs each run in
// the transaction recording its completion, so the log is what committed.
// Every tick from each schedule's first to its last ran exactly once, in
// order, and ticks of one schedule never overlapped.
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
	at := func(d time.Duration) {
		wait := time.NewTimer(time.Until(began.Add(d))) // the schedule runs by the clock
		<-wait.C
	}

	at(8 * time.Second)
	eventually(t, 10*time.Second, func() bool { return leader() != "" }, "a leader")
	lead := leader()
	for id, c := range children {
		if id != lead {
			require.NoError(t, c.cmd.Process.Kill(), "SIGKILL %s", id)
			t.Logf("SIGKILLed worker %s at %s", id, time.Since(began).Round(time.Millisecond))
			delete(children, id)
			break
		}
	}
	at(16 * time.Second)
	lead = leader()
	require.Contains(t, children, lead, "the leader is a live child")
	require.NoError(t, children[lead].cmd.Process.Kill())
	t.Logf("SIGKILLed the leader %s at %s", lead, time.Since(began).Round(time.Millisecond))
	delete(children, lead)

	at(30 * time.Second)
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
		require.GreaterOrEqual(t, len(runs), 25, "%s ran most of the 30 s", name)
		total += len(runs)
	}
	var completions int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+b.db.Schema+".completions").Scan(&completions))
	require.Equal(t, total, completions, "one completion per logged run")
	t.Logf("%d ticks ran once each over %d schedules", total, schedules)
}

// TestRecurringZoneParity: SQL takes exactly the time zones Go's LoadZone
// takes, which are those of the zone database embedded in every worker:
// an upsert never accepts a zone that some worker could not load. Every
// name the server knows is tried (its posix/ and right/ copies included),
// and names that are tricky on one side or the other.
func TestRecurringZoneParity(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	tricky := []string{"UTC", "", "Europe/Berlin", "America/New_York", "America/Argentina/Buenos_Aires", "Etc/GMT+3", "Etc/GMT+5",
		"EST5EDT", "Japan", "GMT", "Factory", "CEST", "PST", "UTC+3", "Mars/Olympus", "Local", "localtime", "posixrules",
		"posix/Europe/Berlin", "right/UTC", "right/Europe/Berlin", "posix/UTC", "../etc/passwd", "/usr/share/zoneinfo/UTC",
		"Europe//Berlin", "Europe/./Berlin", "europe/berlin", "EUROPE/BERLIN", "Europe/Berlin ", " Europe/Berlin",
		"Europe/Berlin\n", "Europe/Berlin\x01", "Europe/Ber\x7flin", "Asia/Kolkata", "zone.tab", "tzdata.zi", "+VERSION"}
	rows, err := b.db.Pool.Query(ctx, "SELECT name FROM pg_timezone_names")
	require.NoError(t, err)
	names := tricky
	server := 0
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		names = append(names, n)
		server++
	}
	require.NoError(t, rows.Err())
	require.Greater(t, server, 400, "the server lists its zones")
	accepted := 0
	for _, tz := range names {
		goErr := (pgsched.Recurring{Name: "x", Spec: "@daily", TimeZone: tz}).Check()
		var sqlOK bool
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT "+b.db.Schema+".recurring_zone_ok(coalesce(nullif($1, ''), 'UTC'))", tz).Scan(&sqlOK))
		require.Equal(t, goErr == nil, sqlOK, "time zone %q: Go %v, SQL %v", tz, goErr, sqlOK)
		if goErr == nil {
			accepted++
		}
	}
	require.Greater(t, accepted, 400)
	// Through the whole upsert, each side refusing with the same words.
	for _, tz := range tricky {
		goErr := (pgsched.Recurring{Name: "x", Spec: "@daily", TimeZone: tz}).Check()
		_, sqlErr := b.db.Pool.Exec(ctx, "SELECT "+b.db.Schema+".recurring_upsert('zone-probe', '@daily', time_zone => $1)", tz)
		if goErr == nil {
			require.NoError(t, sqlErr, "time zone %q", tz)
			continue
		}
		require.ErrorContains(t, sqlErr, strings.TrimPrefix(goErr.Error(), "invalid task: "), "time zone %q", tz)
	}
	for _, tz := range []string{"Europe/Berlin\x00", "Europe/\xffBerlin"} {
		// Not text PostgreSQL can hold: Go refuses it naming the field.
		require.ErrorContains(t, (pgsched.Recurring{Name: "x", Spec: "@daily", TimeZone: tz}).Check(), "time_zone")
	}
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
