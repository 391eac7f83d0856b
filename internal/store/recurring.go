package store

import (
	"context"
	"time"

	"github.com/pgsched/pgsched/internal/dbgen"
)

// RecurringDef is a recurring schedule as its owner defines it.
type RecurringDef struct {
	Name, Spec, TimeZone, Kind, Missed string
	Payload                            []byte
}

// RecurringDue is a schedule whose next tick falls within the horizon.
type RecurringDue struct {
	Name, Spec, TimeZone, Missed string
	// NextTick is the first tick not yet created; nil: the next after now.
	NextTick *time.Time
	// UpdatedAt is when its owner last changed it (upsert, pause, resume).
	UpdatedAt time.Time
	// FailingSince is when the leader set it aside; nil: it works.
	FailingSince *time.Time
	// DBNow is the database's clock when it was read.
	DBNow time.Time
}

// RecurringFailure is a schedule whose ticks could not be created, as it
// was read (UpdatedAt), and why.
type RecurringFailure struct {
	Name      string
	UpdatedAt time.Time
	Error     string
}

// RecurringSetAsideRow is a schedule RecurringSetAside set aside.
type RecurringSetAsideRow struct {
	Name string
	// Newly: it was not set aside before.
	Newly   bool
	RetryAt time.Time
}

// RecurringInfo is a row of the recurring view.
type RecurringInfo struct {
	RecurringDef
	Paused     bool
	NextRunAt  time.Time // zero: none
	LastRunAt  time.Time // zero: never
	LastResult string    // completed, dead, or "" (never)
	// FailingSince and Error: since when and why the leader cannot create
	// its ticks (zero and "": it can).
	FailingSince time.Time
	Error        string
}

// RecurringUpsert creates or changes a schedule (pgsched.recurring_upsert)
// and returns inserted or updated.
func (s *PG) RecurringUpsert(ctx context.Context, db DBTX, d RecurringDef) (string, error) {
	res, err := s.q.RecurringUpsert(ctx, s.db(db), dbgen.RecurringUpsertParams{
		Name: d.Name, Spec: d.Spec, Kind: d.Kind, Payload: d.Payload, TimeZone: d.TimeZone, Missed: d.Missed})
	return res, translate(err)
}

// RecurringPause pauses a schedule; true when it was not paused.
func (s *PG) RecurringPause(ctx context.Context, db DBTX, name string) (bool, error) {
	ok, err := s.q.RecurringPause(ctx, s.db(db), name)
	return ok, translate(err)
}

// RecurringResume resumes a schedule; true when it was paused.
func (s *PG) RecurringResume(ctx context.Context, db DBTX, name string) (bool, error) {
	ok, err := s.q.RecurringResume(ctx, s.db(db), name)
	return ok, translate(err)
}

// RecurringDelete deletes a schedule; true when there was one.
func (s *PG) RecurringDelete(ctx context.Context, db DBTX, name string) (bool, error) {
	ok, err := s.q.RecurringDelete(ctx, s.db(db), name)
	return ok, translate(err)
}

// RecurringDueWithin lists up to max schedules whose next tick falls within
// horizon of the database's now: those that work first, then those set
// aside whose retry is due.
func (s *PG) RecurringDueWithin(ctx context.Context, db DBTX, horizon time.Duration, max int) ([]RecurringDue, error) {
	rows, err := s.q.RecurringDue(ctx, s.db(db), dbgen.RecurringDueParams{HorizonSeconds: horizon.Seconds(), MaxRows: int32(max)})
	if err != nil {
		return nil, translate(err)
	}
	out := make([]RecurringDue, len(rows))
	for i, r := range rows {
		out[i] = RecurringDue{Name: r.Name, Spec: r.Spec, TimeZone: r.TimeZone, Missed: r.Missed, NextTick: r.NextTick,
			UpdatedAt: r.UpdatedAt, FailingSince: r.FailingSince, DBNow: r.DbNow}
	}
	return out, nil
}

// RecurringMaterialize creates ticks and moves the schedule's next tick
// from expected to next (pgsched.recurring_materialize); -1 when it was
// no longer expected.
func (s *PG) RecurringMaterialize(ctx context.Context, db DBTX, name string, expected *time.Time, next time.Time, ticks []time.Time) (int, error) {
	n, err := s.q.RecurringMaterialize(ctx, s.db(db), dbgen.RecurringMaterializeParams{Name: name, Expected: expected, Next: next, Ticks: ticks})
	return int(n), translate(err)
}

// RecurringSetAside sets aside the schedules that failed
// (pgsched.recurring_set_aside), to be retried after as long as each has
// been failing, between min and max; those changed since they were read
// are left alone.
func (s *PG) RecurringSetAside(ctx context.Context, db DBTX, failed []RecurringFailure, min, max time.Duration) ([]RecurringSetAsideRow, error) {
	p := dbgen.RecurringSetAsideParams{MinSeconds: min.Seconds(), MaxSeconds: max.Seconds()}
	for _, f := range failed {
		p.Names = append(p.Names, f.Name)
		p.UpdatedAts = append(p.UpdatedAts, f.UpdatedAt)
		p.Errors = append(p.Errors, f.Error)
	}
	rows, err := s.q.RecurringSetAside(ctx, s.db(db), p)
	if err != nil {
		return nil, translate(err)
	}
	out := make([]RecurringSetAsideRow, len(rows))
	for i, r := range rows {
		out[i] = RecurringSetAsideRow{Name: r.Schedule, Newly: r.Newly, RetryAt: r.RetryAt}
	}
	return out, nil
}

// RecurringSetAsideCount counts the schedules set aside.
func (s *PG) RecurringSetAsideCount(ctx context.Context, db DBTX) (int, error) {
	n, err := s.q.RecurringSetAsideCount(ctx, s.db(db))
	return int(n), translate(err)
}

// RecurringList returns every schedule, by name.
func (s *PG) RecurringList(ctx context.Context, db DBTX) ([]RecurringInfo, error) {
	rows, err := s.q.RecurringList(ctx, s.db(db))
	if err != nil {
		return nil, translate(err)
	}
	epoch := time.Unix(0, 0)
	zero := func(t time.Time) time.Time {
		if t.Equal(epoch) {
			return time.Time{}
		}
		return t
	}
	out := make([]RecurringInfo, len(rows))
	for i, r := range rows {
		out[i] = RecurringInfo{
			RecurringDef: RecurringDef{Name: r.Name, Spec: r.Spec, TimeZone: r.TimeZone, Kind: r.Kind, Missed: r.Missed, Payload: r.Payload},
			Paused:       r.Paused, NextRunAt: zero(r.NextRunAt), LastRunAt: zero(r.LastRunAt), LastResult: r.LastResult,
			Error: r.Error,
		}
		if r.FailingSince != nil {
			out[i].FailingSince = *r.FailingSince
		}
	}
	return out, nil
}

// NotifyDue wakes every node's dispatcher to look for due work again.
func (s *PG) NotifyDue(ctx context.Context, db DBTX) error {
	return translate(s.q.NotifyDue(ctx, s.db(db)))
}

// RecurringPaused lists the names of the paused schedules.
func (s *PG) RecurringPaused(ctx context.Context, db DBTX) ([]string, error) {
	names, err := s.q.RecurringPausedNames(ctx, s.db(db))
	return names, translate(err)
}
