package pgtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgsched/pgsched/internal/migrator"
)

// DB is one test's private, migrated pgsched schema.
type DB struct {
	// URL reaches the server; it does not name the schema.
	URL string
	// Schema is the test's own schema, migrated to the latest version.
	Schema string
	// Pool is a pool on URL for the test to use.
	Pool *pgxpool.Pool
}

// SchemaOptions tune NewSchema.
type SchemaOptions struct {
	// Partitions is the logical partition count. Defaults to 8 (fast to migrate).
	Partitions int
	// TablePartitions is the physical partition count of heads and backlog.
	// Defaults to half of Partitions (at least 1), so tests run with table
	// partitions that each hold several logical ones, as production does.
	TablePartitions int
	// MaxConns of the returned pool. Defaults to 10.
	MaxConns int32
}

// EnvCitus, set to 1 with TEST_DATABASE_URL pointing at a Citus
// coordinator, makes NewSchema distribute every schema it migrates
// (migrate -citus): the whole suite then runs on Citus (make
// test-citus).
const EnvCitus = "PGSCHED_TEST_CITUS"

// Citus reports whether NewSchema distributes its schemas with Citus
// (EnvCitus): tests that look into the server's own views, which differ
// there, ask it.
func Citus() bool { return os.Getenv(EnvCitus) == "1" }

// Patience stretches how long a test waits for something that should
// happen soon: three times as long on Citus, where three servers share the
// machine with the tests and a statement can stall for seconds. A test
// that passes waits no longer for it.
func Patience(d time.Duration) time.Duration {
	if Citus() {
		return 3 * d
	}
	return d
}

// NewSchema migrates a fresh schema for the calling test and drops it when
// the test ends, so tests run in parallel without seeing each other's rows
// or notifications.
func NewSchema(tb testing.TB, opts SchemaOptions) *DB {
	tb.Helper()
	if opts.Partitions == 0 {
		opts.Partitions = 8
	}
	if opts.TablePartitions == 0 && !Citus() { // on Citus the migrator's default: 1
		opts.TablePartitions = max(1, opts.Partitions/2)
	}
	if opts.MaxConns == 0 {
		opts.MaxConns = 10
	}
	base := ServerURL(tb)
	schema := UniqueName(tb, "t")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := migrator.Up(ctx, base, migrator.Options{Schema: schema, Partitions: opts.Partitions, TablePartitions: opts.TablePartitions,
		Citus: Citus()}); err != nil {
		tb.Fatalf("pgtest: migrating schema %s: %v", schema, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = AdminPool(tb).Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	})
	cfg, err := pgxpool.ParseConfig(base)
	if err != nil {
		tb.Fatalf("pgtest: parsing server URL: %v", err)
	}
	cfg.MaxConns = opts.MaxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		tb.Fatalf("pgtest: opening pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	return &DB{URL: base, Schema: schema, Pool: pool}
}
