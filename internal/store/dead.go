package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsched/pgsched/internal/dbgen"
)

// DeadFilter selects dead tasks; every field set must match, and at least
// one must be set.
type DeadFilter struct {
	Kind       string
	OrderingID string
	DiedAfter  time.Time // died at or after
	DiedBefore time.Time // died before
}

func (f DeadFilter) args() (kind, orderingID pgtype.Text, after, before *time.Time) {
	kind = text(f.Kind)
	orderingID = text(f.OrderingID)
	if !f.DiedAfter.IsZero() {
		after = &f.DiedAfter
	}
	if !f.DiedBefore.IsZero() {
		before = &f.DiedBefore
	}
	return
}

// RetryDead puts a dead task back in line (see pgsched.retry_dead_ids) and
// reports whether there was one with that id.
func (s *PG) RetryDead(ctx context.Context, db DBTX, id int64) (int, error) {
	n, err := s.q.DeadRetry(ctx, s.db(db), id)
	return int(n), translate(err)
}

// RetryDeadWhere puts every dead task f selects back in line, in one
// statement, and returns how many.
func (s *PG) RetryDeadWhere(ctx context.Context, db DBTX, f DeadFilter) (int, error) {
	kind, oid, after, before := f.args()
	n, err := s.q.DeadRetryWhere(ctx, s.db(db), dbgen.DeadRetryWhereParams{Kind: kind, OrderingID: oid, DiedAfter: after, DiedBefore: before})
	return int(n), translate(err)
}

// DeleteDead deletes a dead task and reports whether there was one.
func (s *PG) DeleteDead(ctx context.Context, db DBTX, id int64) (int, error) {
	n, err := s.q.DeadDelete(ctx, s.db(db), id)
	return int(n), translate(err)
}

// DeleteDeadWhere deletes every dead task f selects, in one statement,
// and returns how many.
func (s *PG) DeleteDeadWhere(ctx context.Context, db DBTX, f DeadFilter) (int, error) {
	kind, oid, after, before := f.args()
	n, err := s.q.DeadDeleteWhere(ctx, s.db(db), dbgen.DeadDeleteWhereParams{Kind: kind, OrderingID: oid, DiedAfter: after, DiedBefore: before})
	return int(n), translate(err)
}
