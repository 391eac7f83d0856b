package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsched/pgsched/internal/dbgen"
)

// Limit is what pgsched.set_limit takes: zero MaxRunning or MaxStarts
// leaves that bound unset (Per goes with MaxStarts).
type Limit struct {
	MaxRunning int
	MaxStarts  int
	Per        time.Duration
	PerGroup   bool
}

// LimitInfo is a row of the limits view: a kind's limit and what it
// counts now.
type LimitInfo struct {
	Kind            string
	Limit           Limit
	Running         int // tasks running under the limit
	StartedInWindow int // starts in the current window of Per
	Waiting         int64
	Paused          bool
	UpdatedAt       time.Time
}

// SetLimit sets (or replaces) kind's limit; true when it had none.
func (s *PG) SetLimit(ctx context.Context, db DBTX, kind string, l Limit) (bool, error) {
	p := dbgen.LimitSetParams{Kind: kind, PerGroup: l.PerGroup}
	if l.MaxRunning != 0 {
		p.MaxRunning = pgtype.Int4{Int32: sqlCount(l.MaxRunning), Valid: true}
	}
	if l.MaxStarts != 0 {
		p.MaxStarts = pgtype.Int4{Int32: sqlCount(l.MaxStarts), Valid: true}
	}
	if l.Per != 0 {
		p.Per = pgtype.Interval{Microseconds: l.Per.Microseconds(), Valid: true}
	}
	fresh, err := s.q.LimitSet(ctx, s.db(db), p)
	return fresh, translate(err)
}

// ClearLimit removes kind's limit; true when it had one.
func (s *PG) ClearLimit(ctx context.Context, db DBTX, kind string) (bool, error) {
	ok, err := s.q.LimitClear(ctx, s.db(db), kind)
	return ok, translate(err)
}

// LimitSweep parks and unparks heads written around a set_limit or
// clear_limit (pgsched.limit_sweep) and returns how many changed.
func (s *PG) LimitSweep(ctx context.Context, db DBTX) (int, error) {
	n, err := s.q.LimitSweep(ctx, s.db(db))
	return int(n), translate(err)
}

// Limits lists the limited kinds by name (the limits view).
func (s *PG) Limits(ctx context.Context, db DBTX) ([]LimitInfo, error) {
	rows, err := s.q.LimitsList(ctx, s.db(db))
	if err != nil {
		return nil, translate(err)
	}
	out := make([]LimitInfo, len(rows))
	for i, r := range rows {
		out[i] = LimitInfo{
			Kind: r.Kind,
			Limit: Limit{MaxRunning: int(r.MaxRunning.Int32), MaxStarts: int(r.MaxStarts.Int32),
				Per: time.Duration(r.PerSeconds * float64(time.Second)), PerGroup: r.PerGroup},
			Running: int(r.Running), StartedInWindow: int(r.StartedInWindow), Waiting: r.Waiting,
			Paused: r.Paused, UpdatedAt: r.UpdatedAt,
		}
	}
	return out, nil
}

// GroupWeight is a row of the group_weights view: a group's weight in its
// kind's fair share, and whether the kind has a limit now.
type GroupWeight struct {
	Kind      string
	GroupKey  string
	Weight    int
	Limited   bool
	UpdatedAt time.Time
}

// SetGroupWeight gives group of kind a weight in the kind's fair share
// (pgsched.set_group_weight; 1 is the default) and returns the one it had.
func (s *PG) SetGroupWeight(ctx context.Context, db DBTX, kind, group string, weight int) (int, error) {
	was, err := s.q.GroupWeightSet(ctx, s.db(db), dbgen.GroupWeightSetParams{Kind: kind, GroupKey: group, Weight: sqlCount(weight)})
	return int(was), translate(err)
}

// GroupWeights lists the groups given a weight, by kind and group.
func (s *PG) GroupWeights(ctx context.Context, db DBTX) ([]GroupWeight, error) {
	rows, err := s.q.GroupWeightsList(ctx, s.db(db))
	if err != nil {
		return nil, translate(err)
	}
	out := make([]GroupWeight, len(rows))
	for i, r := range rows {
		out[i] = GroupWeight{Kind: r.Kind, GroupKey: r.GroupKey, Weight: int(r.Weight), Limited: r.Limited, UpdatedAt: r.UpdatedAt}
	}
	return out, nil
}
