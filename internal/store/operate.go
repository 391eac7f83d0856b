package store

import (
	"context"
	"time"

	"github.com/pgsched/pgsched/internal/dbgen"
)

// PausedKind is a kind no node starts.
type PausedKind struct {
	Kind     string
	PausedAt time.Time
}

// PauseChannel is the LISTEN/NOTIFY channel on which pause_kind and
// resume_kind announce a change.
func (s *PG) PauseChannel() string { return s.rw.Schema() + ".pause" }

// PauseKind pauses kind (pgsched.pause_kind); true when it was not paused.
func (s *PG) PauseKind(ctx context.Context, db DBTX, kind string) (bool, error) {
	ok, err := s.q.KindPause(ctx, s.db(db), kind)
	return ok, translate(err)
}

// ResumeKind resumes kind (pgsched.resume_kind); true when it was paused.
func (s *PG) ResumeKind(ctx context.Context, db DBTX, kind string) (bool, error) {
	ok, err := s.q.KindResume(ctx, s.db(db), kind)
	return ok, translate(err)
}

// PausedKinds lists the paused kinds by name.
func (s *PG) PausedKinds(ctx context.Context, db DBTX) ([]PausedKind, error) {
	rows, err := s.q.KindsPaused(ctx, s.db(db))
	if err != nil {
		return nil, translate(err)
	}
	out := make([]PausedKind, len(rows))
	for i, r := range rows {
		out[i] = PausedKind{Kind: r.Kind, PausedAt: r.PausedAt}
	}
	return out, nil
}

// PauseSweep marks heads of paused kinds written since their pause (see
// pgsched.pause_sweep) and returns how many heads changed.
func (s *PG) PauseSweep(ctx context.Context, db DBTX) (int, error) {
	n, err := s.q.PauseSweep(ctx, s.db(db))
	return int(n), translate(err)
}

// CancelChannel is the LISTEN/NOTIFY channel on which cancel_running
// announces a request (the payload is the task's id).
func (s *PG) CancelChannel() string { return s.rw.Schema() + ".cancel" }

// CancelRunning asks for the running task with this key to be cancelled
// (pgsched.cancel_running); true when the request is new.
func (s *PG) CancelRunning(ctx context.Context, db DBTX, orderingID string, scheduledAt time.Time, uniquenessKey string) (bool, error) {
	ok, err := s.q.TaskCancelRunning(ctx, s.db(db), dbgen.TaskCancelRunningParams{
		OrderingID: orderingID, ScheduledAt: scheduledAt, UniquenessKey: uniquenessKey})
	return ok, translate(err)
}

// CancelRequests returns the ids of the tasks an operator asked to cancel.
func (s *PG) CancelRequests(ctx context.Context, db DBTX) ([]int64, error) {
	ids, err := s.q.CancelRequestIDs(ctx, s.db(db))
	return ids, translate(err)
}

// PruneCancelRequests deletes the requests of tasks no longer in line.
func (s *PG) PruneCancelRequests(ctx context.Context, db DBTX) (int, error) {
	n, err := s.q.CancelRequestsPrune(ctx, s.db(db))
	return int(n), translate(err)
}
