package pgsched_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/localpg"
	"github.com/pgsched/pgsched/internal/migrator"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/sqlschema"
)

// nowherePool is a pool on a port where nothing listens. It connects
// lazily, so only what reaches for the database fails.
func nowherePool(t *testing.T) *pgxpool.Pool {
	port, err := localpg.FreePort()
	require.NoError(t, err)
	pool, err := pgxpool.New(context.Background(), fmt.Sprintf("postgres://nobody@127.0.0.1:%d/none?sslmode=disable&connect_timeout=5", port))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// TestStartHealsOnceSchemaIsMigrated: Start on a schema not migrated yet
// fails with ErrSchemaNotReady and leaves nothing behind; once the schema
// is migrated, Start on the same Worker succeeds and runs a task.
func TestStartHealsOnceSchemaIsMigrated(t *testing.T) {
	t.Parallel()
	url := pgtest.ServerURL(t)
	schema := pgtest.UniqueName(t, "late")
	t.Cleanup(func() {
		_, _ = pgtest.AdminPool(t).Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	})
	// The worker's connections carry their own application_name, so the
	// test can see whether a failed Start left any open.
	pcfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	pcfg.ConnConfig.RuntimeParams["application_name"] = schema
	pool, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	openConns := func() int {
		var n int
		require.NoError(t, pgtest.AdminPool(t).QueryRow(context.Background(),
			"SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", schema).Scan(&n))
		return n
	}

	ran := make(chan string, 1)
	cfg := fastConfig(schema)
	cfg.Handlers = map[string]pgsched.Handler{"*": pgsched.HandlerFunc(func(_ context.Context, job *pgsched.Job) error {
		ran <- job.OrderingID
		return nil
	})}
	w, err := pgsched.NewWorker(pool, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	err = w.Start(ctx)
	require.ErrorIs(t, err, pgsched.ErrSchemaNotReady)
	require.NotErrorIs(t, err, pgsched.ErrAlreadyStarted)
	require.False(t, w.Ready())
	require.NoError(t, w.Stop(ctx), "Stop after a failed Start")
	eventually(t, 5*time.Second, func() bool { return openConns() == 0 }, "the failed Start's connections are closed")

	require.NoError(t, migrator.Up(ctx, url, migrator.Options{Schema: schema, Partitions: 8, TablePartitions: 4}))
	require.NoError(t, w.Start(ctx), "the same worker starts once the schema is there")
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	require.True(t, w.Ready())
	require.ErrorIs(t, w.Start(ctx), pgsched.ErrAlreadyStarted)

	client, err := pgsched.NewClient(pgtest.AdminPool(t), pgsched.ClientConfig{Schema: schema})
	require.NoError(t, err)
	_, err = client.Schedule(ctx, pgsched.Task{OrderingID: "healed", ScheduledAt: time.Now()})
	require.NoError(t, err)
	select {
	case id := <-ran:
		require.Equal(t, "healed", id)
	case <-ctx.Done():
		t.Fatal("the task did not run")
	}
}

// TestStartDatabaseUnavailable: Start against a database that does not
// answer fails with ErrDatabaseUnavailable and may be called again.
func TestStartDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	w, err := pgsched.NewWorker(nowherePool(t), fastConfig(pgtest.UniqueName(t, "nowhere")))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 2 {
		err = w.Start(ctx)
		require.ErrorIs(t, err, pgsched.ErrDatabaseUnavailable)
		require.NotErrorIs(t, err, pgsched.ErrSchemaNotReady)
	}
	require.NoError(t, w.Stop(ctx))
}

// TestNewWorkerConfigErrors: every config error shows at NewWorker, without
// the database, as ErrInvalidConfig naming the field.
func TestNewWorkerConfigErrors(t *testing.T) {
	t.Parallel()
	pool := nowherePool(t)
	for _, tc := range []struct {
		field, msg string
		change     func(*pgsched.WorkerConfig)
	}{
		{"LeaseTTL", "LeaseTTL 1ms is too short (minimum 100ms)", func(c *pgsched.WorkerConfig) { c.LeaseTTL = time.Millisecond }},
		{"LeaseTTL", "LeaseTTL -1s is too short", func(c *pgsched.WorkerConfig) { c.LeaseTTL = -time.Second }},
		{"Schema", `invalid schema name "Bad-Schema"`, func(c *pgsched.WorkerConfig) { c.Schema = "Bad-Schema" }},
		{"Concurrency", "Concurrency must be between 1 and 10000 (0: the default, 100), got -1", func(c *pgsched.WorkerConfig) { c.Concurrency = -1 }},
		{"Concurrency", "Concurrency must be between 1 and 10000 (0: the default, 100), got 10001", func(c *pgsched.WorkerConfig) {
			c.Concurrency = pgsched.MaxConcurrency + 1
		}},
		{"Concurrency", "got 1073741824", func(c *pgsched.WorkerConfig) { c.Concurrency = 1 << 30 }},
		{"Prefetch", "Prefetch must be at most 10000 (0: as many as Concurrency; negative: none), got 10001", func(c *pgsched.WorkerConfig) {
			c.Prefetch = pgsched.MaxPrefetch + 1
		}},
		{"DrainTimeout", "DrainTimeout must not be negative", func(c *pgsched.WorkerConfig) { c.DrainTimeout = -time.Second }},
		{"PollInterval", "PollInterval must not be negative", func(c *pgsched.WorkerConfig) { c.PollInterval = -time.Second }},
		{"FlexDown", "FlexDown must not be negative", func(c *pgsched.WorkerConfig) { c.FlexDown = -time.Second }},
		{"ClusterInterval", "ClusterInterval 1s must be shorter than LeaseTTL 1s", func(c *pgsched.WorkerConfig) {
			c.LeaseTTL, c.ClusterInterval = time.Second, time.Second
		}},
		{"ClaimAhead", "ClaimAhead must be at most 1s", func(c *pgsched.WorkerConfig) { c.ClaimAhead = 2 * time.Second }},
		{"Retry", "Retry.MaxAttempts must not be negative", func(c *pgsched.WorkerConfig) { c.Retry.MaxAttempts = -1 }},
		// NaN, an infinite or a >1 Jitter spreads delays to nothing: a
		// failing task would retry at once, over and over.
		{"Retry", "Retry.Jitter must be a fraction of at most 1 (negative: none), got NaN", func(c *pgsched.WorkerConfig) { c.Retry.Jitter = math.NaN() }},
		{"Retry", "Retry.Jitter must be a fraction of at most 1 (negative: none), got +Inf", func(c *pgsched.WorkerConfig) { c.Retry.Jitter = math.Inf(1) }},
		{"Retry", "Retry.Jitter must be a fraction of at most 1 (negative: none), got 1.5", func(c *pgsched.WorkerConfig) { c.Retry.Jitter = 1.5 }},
		{`KindRetry["k"]`, `KindRetry["k"].Jitter must be a fraction of at most 1 (negative: none), got NaN`, func(c *pgsched.WorkerConfig) {
			c.KindRetry = map[string]pgsched.RetryPolicy{"k": {Jitter: math.NaN()}}
		}},
		{`Handlers["x"]`, `Handlers["x"] is nil`, func(c *pgsched.WorkerConfig) {
			c.Handlers = map[string]pgsched.Handler{"x": nil}
		}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			cfg := fastConfig("pgsched")
			tc.change(&cfg)
			_, err := pgsched.NewWorker(pool, cfg)
			require.ErrorIs(t, err, pgsched.ErrInvalidConfig)
			require.ErrorContains(t, err, tc.msg)
			var ce *pgsched.ConfigError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, tc.field, ce.Field)
		})
	}
	_, err := pgsched.NewWorker(pool, pgsched.WorkerConfig{Schema: "Bad-Schema"})
	require.ErrorIs(t, err, sqlschema.ErrInvalidName, "the cause stays visible")
	_, err = pgsched.NewWorker(nil, pgsched.WorkerConfig{})
	require.ErrorIs(t, err, pgsched.ErrInvalidConfig)
}
