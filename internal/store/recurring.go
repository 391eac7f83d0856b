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
	// DBNow is the database's clock when it was read.
	DBNow time.Time
}

// RecurringInfo is a row of the recurring view.
type RecurringInfo struct {
	RecurringDef
	Paused     bool
	NextRunAt  time.Time // zero: none
	LastRunAt  time.Time // zero: never
	LastResult string    // completed, dead, or "" (never)
}

// RecurringUpsert creates or changes a schedule (pgsched.recurring_upsert)
// and returns inserted or updated.
func (s *Store) RecurringUpsert(ctx context.Context, db DBTX, d RecurringDef) (string, error) {
	res, err := s.q.RecurringUpsert(ctx, s.db(db), dbgen.RecurringUpsertParams{
		Name: d.Name, Spec: d.Spec, Kind: d.Kind, Payload: d.Payload, TimeZone: d.TimeZone, Missed: d.Missed})
	return res, translate(err)
}

// RecurringPause pauses a schedule; true when it was not paused.
func (s *Store) RecurringPause(ctx context.Context, db DBTX, name string) (bool, error) {
	ok, err := s.q.RecurringPause(ctx, s.db(db), name)
	return ok, translate(err)
}

// RecurringResume resumes a schedule; true when it was paused.
func (s *Store) RecurringResume(ctx context.Context, db DBTX, name string) (bool, error) {
	ok, err := s.q.RecurringResume(ctx, s.db(db), name)
	return ok, translate(err)
}

// RecurringDelete deletes a schedule; true when there was one.
func (s *Store) RecurringDelete(ctx context.Context, db DBTX, name string) (bool, error) {
	ok, err := s.q.RecurringDelete(ctx, s.db(db), name)
	return ok, translate(err)
}

// RecurringDueWithin lists up to max schedules whose next tick falls within
// horizon of the database's now.
func (s *Store) RecurringDueWithin(ctx context.Context, db DBTX, horizon time.Duration, max int) ([]RecurringDue, error) {
	rows, err := s.q.RecurringDue(ctx, s.db(db), dbgen.RecurringDueParams{HorizonSeconds: horizon.Seconds(), MaxRows: int32(max)})
	if err != nil {
		return nil, translate(err)
	}
	out := make([]RecurringDue, len(rows))
	for i, r := range rows {
		out[i] = RecurringDue{Name: r.Name, Spec: r.Spec, TimeZone: r.TimeZone, Missed: r.Missed, NextTick: r.NextTick, DBNow: r.DbNow}
	}
	return out, nil
}

// RecurringMaterialize creates ticks and moves the schedule's next tick
// from expected to next (pgsched.recurring_materialize); -1 when it was
// no longer expected.
func (s *Store) RecurringMaterialize(ctx context.Context, db DBTX, name string, expected *time.Time, next time.Time, ticks []time.Time) (int, error) {
	n, err := s.q.RecurringMaterialize(ctx, s.db(db), dbgen.RecurringMaterializeParams{Name: name, Expected: expected, Next: next, Ticks: ticks})
	return int(n), translate(err)
}

// RecurringList returns every schedule, by name.
func (s *Store) RecurringList(ctx context.Context, db DBTX) ([]RecurringInfo, error) {
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
		}
	}
	return out, nil
}

// NotifyDue wakes every node's dispatcher to look for due work again.
func (s *Store) NotifyDue(ctx context.Context, db DBTX) error {
	return translate(s.q.NotifyDue(ctx, s.db(db)))
}

// RecurringPaused lists the names of the paused schedules.
func (s *Store) RecurringPaused(ctx context.Context, db DBTX) ([]string, error) {
	names, err := s.q.RecurringPausedNames(ctx, s.db(db))
	return names, translate(err)
}
