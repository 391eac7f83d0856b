package pgsched_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/schemaversion"
)

// TestStartRefusesNewerSchema: on a schema a newer build migrated (a
// version this build does not embed in goose's table), Start refuses with
// ErrSchemaNewer, naming both versions, and leaves no node behind.
func TestStartRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	ctx := context.Background()
	newer := schemaversion.Latest() + 1
	_, err := db.Pool.Exec(ctx, "INSERT INTO "+db.Schema+".goose_db_version (version_id, is_applied) VALUES ($1, true)", newer)
	require.NoError(t, err)

	w, err := pgsched.NewWorker(db.Pool, fastConfig(db.Schema))
	require.NoError(t, err)
	err = w.Start(ctx)
	require.ErrorIs(t, err, pgsched.ErrSchemaNewer)
	require.NotErrorIs(t, err, pgsched.ErrSchemaNotReady, "retrying cannot heal it")
	require.EqualError(t, err, fmt.Sprintf("pgsched: schema version %d is newer than this build (%d); upgrade the worker", newer, schemaversion.Latest()))
	require.NoError(t, w.Stop(ctx))
	require.Equal(t, 0, countNodes(t, db))
}

func countNodes(t *testing.T, db *pgtest.DB) int {
	t.Helper()
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM "+db.Schema+".nodes").Scan(&n))
	return n
}
