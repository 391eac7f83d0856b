package main

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/schemaversion"
)

// TestNewerSchemaExits: on a schema a newer build migrated, the worker
// exits at once with the error saying so (a retry loop would return nil
// when the context ends), whether it migrates first or not, and leaves the
// schema as it was.
func TestNewerSchemaExits(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	ctx := context.Background()
	newer := schemaversion.Latest() + 1
	_, err := db.Pool.Exec(ctx, "INSERT INTO "+db.Schema+".goose_db_version (version_id, is_applied) VALUES ($1, true)", newer)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, "UPDATE "+db.Schema+".sql_objects SET checksum = 'newer'")
	require.NoError(t, err)
	want := fmt.Sprintf("schema version %d is newer than this build (%d); upgrade the worker", newer, schemaversion.Latest())

	for _, migrate := range []string{"true", "false"} {
		env := map[string]string{"DATABASE_URL": db.URL, "PGSCHED_SCHEMA": db.Schema, "PGSCHED_HTTP_ADDR": freeAddr(t),
			"PGSCHED_MIGRATE": migrate, "PGSCHED_LEASE_TTL": "1s"}
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := run(rctx, nil, func(k string) string { return env[k] }, io.Discard, io.Discard)
		cancel()
		require.ErrorIs(t, err, pgsched.ErrSchemaNewer, "PGSCHED_MIGRATE=%s", migrate)
		require.ErrorContains(t, err, want, "PGSCHED_MIGRATE=%s", migrate)
		var sum string
		require.NoError(t, db.Pool.QueryRow(ctx, "SELECT checksum FROM "+db.Schema+".sql_objects").Scan(&sum))
		require.Equal(t, "newer", sum, "no function or view rewritten")
	}
}
