package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsched/pgsched/internal/dbgen"
	"github.com/pgsched/pgsched/internal/partition"
)

// The operator CLI's reads (cmd/pgsched), as sqlc types them. Every one
// reads views only, so <schema>_read may run it.
type (
	CLIKindLag = dbgen.CLIKindLagRow
	CLIFound   = dbgen.CLITaskFindRow
	CLIDead    = dbgen.CLIDeadRow
)

// CLIKind is a kind as the leader last counted it. PausedAt and CountedAt
// are zero when it is not paused, and when no count was taken yet.
type CLIKind struct {
	Kind                        string
	Pending, Due, Running, Dead int64
	Paused                      bool
	PausedAt, CountedAt         time.Time
}

// cliPartition is the partition of orderingID (0 when it is ""), from the
// partitions view's row count.
func (s *PG) cliPartition(ctx context.Context, db DBTX, orderingID string) (int32, error) {
	if orderingID == "" {
		return 0, nil
	}
	n, err := s.q.CLIPartitionCount(ctx, s.db(db))
	if err != nil {
		return 0, translate(err)
	}
	if n <= 0 {
		return 0, fmt.Errorf("the partitions view of schema %s is empty", s.Schema())
	}
	return int32(partition.Of(orderingID, int(n))), nil
}

// CLIKinds lists the leader's last count per kind, with the paused kinds.
func (s *PG) CLIKinds(ctx context.Context, db DBTX) ([]CLIKind, error) {
	rows, err := s.q.CLIKinds(ctx, s.db(db))
	if err != nil {
		return nil, translate(err)
	}
	out := make([]CLIKind, len(rows))
	for i, r := range rows {
		out[i] = CLIKind{Kind: r.Kind, Pending: r.Pending, Due: r.Due, Running: r.Running, Dead: r.Dead, Paused: r.Paused}
		if r.PausedAt != nil {
			out[i].PausedAt = *r.PausedAt
		}
		if !r.CountedAt.Equal(time.Unix(0, 0)) {
			out[i].CountedAt = r.CountedAt
		}
	}
	return out, nil
}

// CLIKindLag is, per kind with a due task, since when its oldest due head
// waits. It reads every due head.
func (s *PG) CLIKindLag(ctx context.Context, db DBTX) ([]CLIKindLag, error) {
	rows, err := s.q.CLIKindLag(ctx, s.db(db))
	return rows, translate(err)
}

// CLITasks lists up to max pending and running tasks of kind, state and
// orderingID when given, by partition and key.
func (s *PG) CLITasks(ctx context.Context, db DBTX, kind, state, orderingID string, max int) ([]Listed, error) {
	p, err := s.cliPartition(ctx, db, orderingID)
	if err != nil {
		return nil, err
	}
	rows, err := s.q.CLITasks(ctx, s.db(db), dbgen.CLITasksParams{
		Kind: text(kind), State: text(state), OrderingID: text(orderingID), PartitionID: p, MaxRows: int32(max)})
	if err != nil {
		return nil, translate(err)
	}
	out := make([]Listed, len(rows))
	for i, r := range rows {
		out[i] = listed(dbgen.TaskListRow(r))
	}
	return out, nil
}

// CLITaskFind finds the pending, running and dead tasks with id (when
// hasID) or uniqueness key key, of orderingID when given.
func (s *PG) CLITaskFind(ctx context.Context, db DBTX, id int64, hasID bool, key, orderingID string) ([]CLIFound, error) {
	p, err := s.cliPartition(ctx, db, orderingID)
	if err != nil {
		return nil, err
	}
	rows, err := s.q.CLITaskFind(ctx, s.db(db), dbgen.CLITaskFindParams{
		ID: pgtype.Int8{Int64: id, Valid: hasID}, UniquenessKey: pgtype.Text{String: key, Valid: true},
		OrderingID: text(orderingID), PartitionID: p})
	return rows, translate(err)
}

// CLIDead lists up to max dead tasks, newest first, that f selects, and
// of id when it is not 0. A zero f selects every one.
func (s *PG) CLIDead(ctx context.Context, db DBTX, id int64, f DeadFilter, max int) ([]CLIDead, error) {
	p, err := s.cliPartition(ctx, db, f.OrderingID)
	if err != nil {
		return nil, err
	}
	kind, oid, after, before := f.args()
	rows, err := s.q.CLIDead(ctx, s.db(db), dbgen.CLIDeadParams{
		ID: pgtype.Int8{Int64: id, Valid: id != 0}, Kind: kind, OrderingID: oid, PartitionID: p,
		DiedAfter: after, DiedBefore: before, MaxRows: int32(max)})
	return rows, translate(err)
}
