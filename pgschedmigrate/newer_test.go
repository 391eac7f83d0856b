package pgschedmigrate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/schemaversion"
	"github.com/pgsched/pgsched/pgschedmigrate"
)

// TestNewerSchemaRefused: on a schema a newer pgsched migrated (a version
// this build does not embed, and a function of its own), Up, Down and
// Reset refuse with ErrSchemaNewer and change nothing (this build's
// functions would replace the newer ones, and drop the one it does not
// know), and Status lists the newer version and says so.
func TestNewerSchemaRefused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema := pgtest.UniqueName(t, "newer")
	pool, err := pgxpool.New(ctx, pgtest.ServerURL(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	t.Cleanup(func() {
		_, _ = pgtest.AdminPool(t).Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	})
	cfg := pgschedmigrate.Config{Schema: schema, Partitions: 8}
	require.NoError(t, pgschedmigrate.Up(ctx, pool, cfg))

	// What a newer build leaves: its version, a function of its own, and
	// the checksum of its functions and views.
	newer := schemaversion.Latest() + 1
	for _, q := range []string{
		fmt.Sprintf("INSERT INTO %s.goose_db_version (version_id, is_applied) VALUES (%d, true)", schema, newer),
		"CREATE FUNCTION " + schema + ".added_by_newer() RETURNS integer LANGUAGE sql AS 'SELECT 1'",
		"UPDATE " + schema + ".sql_objects SET checksum = 'newer'",
	} {
		_, err := pool.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	untouched := func() {
		t.Helper()
		var fn, tables int
		var sum string
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname IN ('added_by_newer', 'schedule')",
			schema).Scan(&fn))
		require.Equal(t, 2, fn, "the newer build's function and the API stay")
		require.NoError(t, pool.QueryRow(ctx, "SELECT checksum FROM "+schema+".sql_objects").Scan(&sum))
		require.Equal(t, "newer", sum, "no function or view rewritten")
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename = 'heads'", schema).Scan(&tables))
		require.Equal(t, 1, tables)
	}
	want := fmt.Sprintf("schema version %d is newer than this build (%d); upgrade pgsched", newer, schemaversion.Latest())

	m, err := pgschedmigrate.New(ctx, pool, cfg)
	require.NoError(t, err)
	defer m.Close()
	for name, f := range map[string]func(context.Context) error{"Up": m.Up, "Down": m.Down, "Reset": m.Reset} {
		err := f(ctx)
		require.ErrorIs(t, err, pgschedmigrate.ErrSchemaNewer, name)
		require.ErrorIs(t, err, pgsched.ErrSchemaNewer, name)
		require.EqualError(t, err, want, name)
		untouched()
	}

	st, err := m.Status(ctx)
	require.ErrorIs(t, err, pgschedmigrate.ErrSchemaNewer)
	require.EqualError(t, err, want)
	require.NotEmpty(t, st)
	last := st[len(st)-1]
	require.Equal(t, newer, last.Version)
	require.True(t, last.Applied)
	require.True(t, last.Newer)
	require.Empty(t, last.Name)
	for _, s := range st[:len(st)-1] {
		require.True(t, s.Applied, "%d", s.Version)
		require.False(t, s.Newer, "%d", s.Version)
	}
}
