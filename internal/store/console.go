package store

import (
	"context"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsched/pgsched/internal/dbgen"
)

// The web console's reads (pgschedui), as sqlc types them.
type (
	ConsoleNode      = dbgen.ConsoleNodesRow
	ConsolePartition = dbgen.ConsolePartitionsRow
	ConsoleKind      = dbgen.ConsoleKindsRow
	ConsoleDead      = dbgen.ConsoleDeadRow
	ConsoleLateness  = dbgen.ConsoleLatenessRow
)

// ConsoleNodes lists the nodes (the cluster view).
func (s *Store) ConsoleNodes(ctx context.Context, db DBTX) ([]ConsoleNode, error) {
	rows, err := s.q.ConsoleNodes(ctx, s.db(db))
	return rows, translate(err)
}

// ConsolePartitions lists each partition's owner and who serves it.
func (s *Store) ConsolePartitions(ctx context.Context, db DBTX) ([]ConsolePartition, error) {
	rows, err := s.q.ConsolePartitions(ctx, s.db(db))
	return rows, translate(err)
}

// ConsoleKinds counts tasks per kind and state.
func (s *Store) ConsoleKinds(ctx context.Context, db DBTX) ([]ConsoleKind, error) {
	rows, err := s.q.ConsoleKinds(ctx, s.db(db))
	return rows, translate(err)
}

// ConsoleLateness is the lateness view's one row.
func (s *Store) ConsoleLateness(ctx context.Context, db DBTX) (ConsoleLateness, error) {
	row, err := s.q.ConsoleLateness(ctx, s.db(db))
	return row, translate(err)
}

// ConsoleDead lists the newest dead tasks, of kind when given.
func (s *Store) ConsoleDead(ctx context.Context, db DBTX, kind string, max int) ([]ConsoleDead, error) {
	rows, err := s.q.ConsoleDead(ctx, s.db(db), dbgen.ConsoleDeadParams{
		Kind: pgtype.Text{String: kind, Valid: kind != ""}, MaxRows: int32(max)})
	return rows, translate(err)
}
