package store

import (
	"context"
	"fmt"
)

// Open returns the Store schema needs: Citus when the schema is
// distributed over Citus, PG otherwise. It asks the database, so it fails
// while the schema is not there yet.
func Open(ctx context.Context, db DBTX, schema string) (Store, error) {
	pg, err := New(schema)
	if err != nil {
		return nil, err
	}
	distributed, err := pg.q.SchemaDistributed(ctx, pg.db(db))
	if err != nil {
		return nil, fmt.Errorf("reading whether %s is distributed over Citus: %w", pg.Schema(), err)
	}
	if distributed {
		return &Citus{PG: pg}, nil
	}
	return pg, nil
}
