// Package recurring turns recurring schedules into tasks. The cluster's
// leader runs Round every cluster interval: for each schedule whose next
// tick falls within the horizon it computes the ticks (internal/cronspec,
// in the schedule's time zone) and creates them as ordinary tasks in one
// call that also moves the schedule's next tick on by compare and set
// (pgsched.recurring_materialize). A tick is therefore created once even
// when two nodes lead at once for a moment, and never lost when a leader
// dies: the next leader starts from the schedule's stored next tick.
//
// Ticks are created a little ahead (the worker passes two lease TTLs), so
// a leader failover does not make them late. A tick that is already more than Tolerance in the past when
// it is reached was missed (no node led then); the schedule's policy says
// what happens to missed ticks: skip them, run one catch-up (the latest),
// or run all of them (at most MaxCatchUp, the latest), in order, at once.
//
// # Schedules that fail
//
// A schedule whose ticks cannot be created (its spec does not parse, its
// zone does not load here, schedule_many refuses its kind or payload: a
// row recurring_upsert would refuse now, written before it checked as
// much or by hand) is set aside, in the database: failing_since, last_error
// and retry_at, shown by the recurring view. Rounds leave it out until
// retry_at, after as long as it has been failing (RetryMin to RetryMax),
// and take the schedules that work first, so however many fail, they never
// take the turn of one that works. It is logged when it is set aside, once
// for the cluster, and when it works again: after a retry, an upsert or a
// resume (both take it back at once). An error that is the database's, not
// the schedule's (a lost connection, a server shutting down), sets nothing
// aside: the round stops, and the next tries again.
package recurring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/pgsched/pgsched/internal/cronspec"
	"github.com/pgsched/pgsched/internal/store"
)

// Defaults of the Materializer's fields.
const (
	DefaultBatch    = 1000
	DefaultRetryMin = time.Minute
	DefaultRetryMax = time.Hour
)

// MaxCatchUp caps the missed ticks the "all" policy runs.
const MaxCatchUp = 100

// Tolerance is how far in the past a tick may be when it is reached and
// still count as on time rather than missed.
const Tolerance = time.Second

// Events observe the materializer (metrics). Any field may be nil.
type Events struct {
	// Created counts ticks created, of which missed ones run as catch-ups.
	Created func(ticks, catchUps int)
	// Skipped counts ticks skipped under the schedule's policy.
	Skipped func(n int)
}

// Materializer creates the ticks of due schedules.
type Materializer struct {
	Store   store.Store
	DB      store.DBTX
	Horizon time.Duration
	Logger  *slog.Logger
	Events  Events
	// Batch is how many due schedules a round takes at most. Defaults to
	// DefaultBatch.
	Batch int
	// RetryMin and RetryMax bound how long a schedule set aside waits
	// before it is tried again: as long as it has been failing, within
	// them. Default to DefaultRetryMin and DefaultRetryMax.
	RetryMin, RetryMax time.Duration

	mu    sync.Mutex
	specs map[string]cronspec.Schedule
	// paused is the set of paused schedules the last round saw (nil before
	// the first), so pauses and resumes are logged once each.
	paused map[string]bool
}

// Round creates the ticks due within the horizon for up to Batch
// schedules, and sets aside those whose ticks cannot be created.
func (m *Materializer) Round(ctx context.Context) error {
	if err := m.notePaused(ctx); err != nil {
		return err
	}
	batch := m.Batch
	if batch <= 0 {
		batch = DefaultBatch
	}
	due, err := m.Store.RecurringDueWithin(ctx, m.DB, m.Horizon, batch)
	if err != nil {
		return err
	}
	created := 0
	var failed []store.RecurringFailure
	var dbErr error
	for _, d := range due {
		n, err := m.one(ctx, d)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if store.Unavailable(err) {
				// The database's trouble, not the schedule's: the others
				// would meet it too.
				dbErr = fmt.Errorf("recurring schedule %q: %w", d.Name, err)
				break
			}
			failed = append(failed, store.RecurringFailure{Name: d.Name, UpdatedAt: d.UpdatedAt, Error: err.Error()})
			continue
		}
		if d.FailingSince != nil && n >= 0 {
			m.Logger.Info("recurring schedule works again", "schedule", d.Name, "failing_since", *d.FailingSince)
		}
		created += max(n, 0)
	}
	if err := m.setAside(ctx, failed); err != nil {
		return errors.Join(dbErr, err)
	}
	if created > 0 {
		// Ticks are created up to two lease TTLs ahead, beyond the range
		// schedule_many announces itself: every node's next wake-up must
		// take them into account now, not at its next poll.
		if err := m.Store.NotifyDue(ctx, m.DB); err != nil {
			return errors.Join(dbErr, err)
		}
	}
	return dbErr
}

// setAside records the schedules that failed and logs those new to it.
func (m *Materializer) setAside(ctx context.Context, failed []store.RecurringFailure) error {
	if len(failed) == 0 {
		return nil
	}
	retryMin, retryMax := m.RetryMin, m.RetryMax
	if retryMin <= 0 {
		retryMin = DefaultRetryMin
	}
	if retryMax <= 0 {
		retryMax = DefaultRetryMax
	}
	rows, err := m.Store.RecurringSetAside(ctx, m.DB, failed, retryMin, max(retryMin, retryMax))
	if err != nil {
		return fmt.Errorf("setting aside %d recurring schedules that fail: %w", len(failed), err)
	}
	why := make(map[string]string, len(failed))
	for _, f := range failed {
		why[f.Name] = f.Error
	}
	for _, r := range rows {
		if r.Newly {
			m.Logger.Warn("recurring schedule set aside: its ticks cannot be created; recurring_upsert or recurring_resume takes it back, else it is tried again at retry_at",
				"schedule", r.Name, "error", why[r.Name], "retry_at", r.RetryAt)
		} else {
			m.Logger.Debug("recurring schedule set aside still fails", "schedule", r.Name, "error", why[r.Name], "retry_at", r.RetryAt)
		}
	}
	return nil
}

func (m *Materializer) schedule(spec string) (cronspec.Schedule, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.specs[spec]; ok {
		return s, nil
	}
	s, err := cronspec.Parse(spec)
	if err != nil {
		return s, err
	}
	if m.specs == nil || len(m.specs) > 10000 {
		m.specs = map[string]cronspec.Schedule{}
	}
	m.specs[spec] = s
	return s, nil
}

// one creates a schedule's due ticks and returns how many, or -1 when
// another node did, or the schedule changed meanwhile.
func (m *Materializer) one(ctx context.Context, d store.RecurringDue) (int, error) {
	sched, err := m.schedule(d.Spec)
	if err != nil {
		return 0, fmt.Errorf("spec %q: %w", d.Spec, err)
	}
	loc, err := cronspec.LoadZone(d.TimeZone)
	if err != nil {
		return 0, fmt.Errorf("time_zone: %w", err)
	}
	now := d.DBNow
	next := now
	if d.NextTick != nil {
		next = *d.NextTick
	} else {
		next = sched.Next(now, loc)
	}
	var missed []time.Time
	trimmed := 0 // missed ticks before the latest MaxCatchUp (at least: see below)
	for steps := 0; !next.IsZero() && next.Before(now.Add(-Tolerance)); steps++ {
		if steps == 1_000_000 {
			// Down for very long with frequent ticks: go on from the last
			// MaxCatchUp minutes, which hold the latest ticks of any
			// schedule that ticks this often, rather than walk every one.
			trimmed += len(missed)
			missed = missed[:0]
			next = sched.Next(now.Add(-Tolerance-time.Duration(MaxCatchUp)*time.Minute), loc)
			continue
		}
		if len(missed) == MaxCatchUp {
			missed = missed[1:]
			trimmed++
		}
		missed = append(missed, next)
		next = sched.Next(next, loc)
	}
	skipped := trimmed
	var ticks []time.Time
	switch d.Missed {
	case "all":
		ticks = missed
	case "one":
		if len(missed) > 0 {
			ticks = missed[len(missed)-1:]
			skipped += len(missed) - 1
		}
	default: // skip
		skipped += len(missed)
	}
	catchUps := len(ticks)
	horizon := now.Add(m.Horizon)
	for !next.IsZero() && !next.After(horizon) {
		ticks = append(ticks, next)
		next = sched.Next(next, loc)
	}
	if next.IsZero() {
		// No tick within the search limit: park it far ahead.
		next = now.AddDate(100, 0, 0)
	}
	created, err := m.Store.RecurringMaterialize(ctx, m.DB, d.Name, d.NextTick, next, ticks)
	if err != nil {
		return 0, err
	}
	if created < 0 {
		return -1, nil // another node did it, or the schedule changed meanwhile
	}
	if d.NextTick == nil {
		m.Logger.Info("recurring schedule (new, changed or resumed) ticks from now", "schedule", d.Name, "spec", d.Spec,
			"time_zone", d.TimeZone, "next_tick", next)
	}
	if len(missed) > 0 {
		m.Logger.Info("recurring schedule missed ticks while no node ran", "schedule", d.Name, "missed", len(missed)+trimmed,
			"policy", d.Missed, "catch_up_runs", catchUps, "first_missed", missed[0], "last_missed", missed[len(missed)-1])
	}
	if f := m.Events.Created; f != nil && created > 0 {
		f(created, catchUps)
	}
	if f := m.Events.Skipped; f != nil && skipped > 0 {
		f(skipped)
	}
	return created, nil
}

// notePaused logs the schedules paused or resumed since the last round.
// A node that becomes leader logs the schedules paused at that moment.
func (m *Materializer) notePaused(ctx context.Context) error {
	names, err := m.Store.RecurringPaused(ctx, m.DB)
	if err != nil {
		return err
	}
	now := make(map[string]bool, len(names))
	for _, n := range names {
		now[n] = true
		if !m.paused[n] {
			m.Logger.Info("recurring schedule paused", "schedule", n)
		}
	}
	for n := range m.paused {
		if !now[n] {
			m.Logger.Info("recurring schedule no longer paused (resumed or deleted)", "schedule", n)
		}
	}
	m.paused = now
	return nil
}
