package store

import (
	"context"
	"fmt"
)

// SchemaVersion is the newest migration applied to the schema.
func (s *PG) SchemaVersion(ctx context.Context, db DBTX) (int64, error) {
	v, err := s.q.SchemaVersion(ctx, s.db(db))
	if err != nil {
		return 0, fmt.Errorf("reading the version of schema %s: %w", s.Schema(), err)
	}
	return v, nil
}
