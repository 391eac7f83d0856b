package pgschedmigrate_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/pgschedmigrate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestMigrateFromGo: a program migrates a schema of its choice over its
// own pool, a client then enqueues into it, a second Up changes nothing,
// Status says every migration is applied, and Reset removes the tables.
func TestMigrateFromGo(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema := pgtest.UniqueName(t, "gomig")
	pool, err := pgxpool.New(ctx, pgtest.ServerURL(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	t.Cleanup(func() {
		_, _ = pgtest.AdminPool(t).Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	})

	cfg := pgschedmigrate.Config{Schema: schema, Partitions: 8}
	require.NoError(t, pgschedmigrate.Up(ctx, pool, cfg))
	client, err := pgsched.NewClient(pool, pgsched.ClientConfig{Schema: schema})
	require.NoError(t, err)
	res, err := client.Schedule(ctx, pgsched.Task{OrderingID: "o", ScheduledAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.Equal(t, pgsched.Inserted, res)

	m, err := pgschedmigrate.New(ctx, pool, cfg)
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.Up(ctx), "a second Up finds nothing to do")
	st, err := m.Status(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, st)
	for _, s := range st {
		require.True(t, s.Applied, "%d %s", s.Version, s.Name)
	}
	var parts int
	require.NoError(t, pool.QueryRow(ctx, "SELECT partition_count FROM "+schema+".settings").Scan(&parts))
	require.Equal(t, 8, parts)

	require.NoError(t, m.Reset(ctx))
	var tables int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename <> 'goose_db_version'", schema).Scan(&tables))
	require.Zero(t, tables)
}

func TestMigrateBadConfig(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	require.NoError(t, err)
	defer pool.Close()
	for _, cfg := range []pgschedmigrate.Config{{Schema: "Bad-Schema"}, {Schema: "select"}, {Partitions: 5000}} {
		_, err := pgschedmigrate.New(context.Background(), pool, cfg)
		require.ErrorIs(t, err, pgschedmigrate.ErrInvalidConfig, "%+v", cfg)
	}
	_, err = pgschedmigrate.New(context.Background(), nil, pgschedmigrate.Config{})
	require.ErrorIs(t, err, pgschedmigrate.ErrInvalidConfig)
}
