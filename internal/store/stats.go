package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/pgsched/pgsched/internal/dbgen"
)

// Stats are a node's outcomes and first-attempt start lateness since it
// last added them (stats_minutes).
type Stats struct {
	Completed, Retried, Dead, Snoozed int64
	// Started first attempts; their lateness summed and the worst, seconds.
	Started                  int64
	LatenessSum, LatenessMax float64
}

// Zero reports whether there is nothing to add.
func (s Stats) Zero() bool { return s == Stats{} }

// StatsMinute is one minute of the cluster's throughput.
type StatsMinute = dbgen.StatsHourRow

// Counted is when the leader last counted tasks per kind, and how long it
// took.
type Counted = dbgen.ConsoleCountedRow

// KindCount is one kind's row of the leader's last count: its tasks
// pending, due, running and dead, and how long its oldest due task had
// waited past its time (0 when none was due).
type KindCount = dbgen.KindsCountedRow

// AddStats adds st to node's row for the current minute.
func (s *PG) AddStats(ctx context.Context, db DBTX, node string, st Stats) error {
	return translate(s.q.StatsAdd(ctx, s.db(db), dbgen.StatsAddParams{
		NodeID: node, Completed: st.Completed, Retried: st.Retried, Dead: st.Dead, Snoozed: st.Snoozed,
		Started: st.Started, LatenessSum: st.LatenessSum, LatenessMax: st.LatenessMax,
	}))
}

// PruneStats drops minutes older than a day.
func (s *PG) PruneStats(ctx context.Context, db DBTX) (int64, error) {
	n, err := s.q.StatsPrune(ctx, s.db(db))
	return n, translate(err)
}

// CountKinds recounts tasks per kind (pgsched.count_kinds).
func (s *PG) CountKinds(ctx context.Context, db DBTX) (int, error) {
	n, err := s.q.CountKinds(ctx, s.db(db))
	return int(n), translate(err)
}

// KindsCounted is the leader's last count, per kind, with the wait of
// each kind's oldest due task when counted.
func (s *PG) KindsCounted(ctx context.Context, db DBTX) ([]KindCount, error) {
	rows, err := s.q.KindsCounted(ctx, s.db(db))
	return rows, translate(err)
}

// StatsHour is the cluster's throughput over the last hour, oldest
// minute first; minutes nobody recorded anything in are missing.
func (s *PG) StatsHour(ctx context.Context, db DBTX) ([]StatsMinute, error) {
	rows, err := s.q.StatsHour(ctx, s.db(db))
	return rows, translate(err)
}

// LastCounted reports the last count per kind; ok is false before the
// first.
func (s *PG) LastCounted(ctx context.Context, db DBTX) (c Counted, ok bool, err error) {
	c, err = s.q.ConsoleCounted(ctx, s.db(db))
	if errors.Is(err, pgx.ErrNoRows) {
		return c, false, nil
	}
	return c, err == nil, translate(err)
}
