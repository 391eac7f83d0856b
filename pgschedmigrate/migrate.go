// Package pgschedmigrate creates and upgrades pgsched's schema from a Go
// program, over the program's own pool, so a service can migrate at start
// (or in a deploy job) without running cmd/migrate. It applies the same
// embedded SQL as cmd/migrate, which is built on it: the numbered
// migrations (tables), then the functions and views of the SQL API.
//
// Two processes migrating the same schema at once are safe: an advisory
// lock keyed by the schema lets one apply and the other find nothing to
// do.
//
//	m, err := pgschedmigrate.New(ctx, pool, pgschedmigrate.Config{Schema: "pgsched"})
//	if err != nil { ... }
//	defer m.Close()
//	err = m.Up(ctx)
package pgschedmigrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgsched/pgsched/internal/migrator"
	"github.com/pgsched/pgsched/internal/schemaversion"
)

// ErrInvalidConfig wraps every error New returns for a Config it refuses.
var ErrInvalidConfig = errors.New("pgschedmigrate: invalid config")

// ErrSchemaNewer matches the error of Up, Down, Reset and Status on a
// schema that a newer pgsched migrated past this build ("schema version N
// is newer than this build (M); upgrade pgsched"). Nothing is changed:
// this build's functions and views would replace the newer ones. It is
// pgsched.ErrSchemaNewer, which the worker's Start returns.
var ErrSchemaNewer = schemaversion.ErrNewer

// DefaultPartitions is the number of logical partitions when none is
// chosen.
const DefaultPartitions = migrator.DefaultPartitions

// Config says which schema to migrate and how a new one is laid out.
type Config struct {
	// Schema holds pgsched's tables; the worker's and client's Config.Schema
	// must name the same. Defaults to "pgsched".
	Schema string
	// Partitions is the number of logical partitions, fixed when the schema
	// is created (later values are ignored). Defaults to 64; at most 4096.
	Partitions int
	// TablePartitions is how many physical partitions the task tables are
	// split into, fixed when the schema is created. Defaults to 2 (or
	// Partitions, if fewer); with Citus to 1 (a shard holds one logical
	// partition).
	TablePartitions int
	// Citus makes Up distribute the schema over a Citus cluster, run on its
	// coordinator: task tables by partition, one shard per logical
	// partition, co-located; the small cluster tables as reference tables.
	// Once distributed, later Ups distribute what they add.
	Citus bool
	// Roles makes Up create the roles <schema>_enqueue (may only enqueue,
	// cancel and reschedule), <schema>_worker (what a worker needs, without
	// owning the schema) and <schema>_read (the views), and grant them
	// their privileges. Needs the CREATEROLE privilege. Once they exist,
	// every Up that changes the schema grants again.
	Roles bool
	// Logger receives one line per migration applied. Defaults to none.
	Logger *slog.Logger
}

// Migrator migrates one schema. Close it after use.
type Migrator struct{ m *migrator.Migrator }

// Status is one migration's state.
type Status struct {
	Version   int64
	Name      string
	Applied   bool
	AppliedAt time.Time
	// Newer: applied by a newer pgsched; this build does not know it (Name
	// is empty).
	Newer bool
}

// New prepares a Migrator for cfg.Schema on the database pool reaches. It
// opens connections of its own from the pool's configuration (at most
// two, closed by Close), since a migration needs session settings the
// pool's connections must not keep.
func New(ctx context.Context, pool *pgxpool.Pool, cfg Config) (*Migrator, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: New needs a pool", ErrInvalidConfig)
	}
	opts := migrator.Options{Schema: cfg.Schema, Partitions: cfg.Partitions, TablePartitions: cfg.TablePartitions, Roles: cfg.Roles, Citus: cfg.Citus, Logger: cfg.Logger}
	if err := opts.Check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	m, err := migrator.OpenConfig(ctx, pool.Config().ConnConfig.Copy(), opts)
	if err != nil {
		return nil, fmt.Errorf("pgschedmigrate: %w", err)
	}
	return &Migrator{m: m}, nil
}

// Close releases the Migrator's connections.
func (m *Migrator) Close() error { return m.m.Close() }

// Up applies every pending migration and brings the SQL API's functions
// and views up to this version. Safe to call at every start: with nothing
// pending it changes nothing.
func (m *Migrator) Up(ctx context.Context) error { return m.m.Up(ctx) }

// Down drops the SQL API and rolls back the newest migration.
func (m *Migrator) Down(ctx context.Context) error { return m.m.Down(ctx) }

// Reset drops the SQL API and rolls back every migration: every task is
// gone. The schema itself stays (it keeps goose's version table).
func (m *Migrator) Reset(ctx context.Context) error { return m.m.Reset(ctx) }

// Drop drops the schema with everything in it, migration history
// included: meant for throwaway schemas in tests (see pgschedtest).
func (m *Migrator) Drop(ctx context.Context) error { return m.m.Drop(ctx) }

// Status lists every migration and whether it is applied. On a schema a
// newer pgsched migrated, the list ends with the versions this build does
// not know (Newer), and the error, returned with the list, matches
// ErrSchemaNewer.
func (m *Migrator) Status(ctx context.Context) ([]Status, error) {
	st, err := m.m.Status(ctx)
	if st == nil {
		return nil, err
	}
	out := make([]Status, len(st))
	for i, s := range st {
		out[i] = Status(s)
	}
	return out, err
}

// Up is New, Up and Close in one call.
func Up(ctx context.Context, pool *pgxpool.Pool, cfg Config) error {
	m, err := New(ctx, pool, cfg)
	if err != nil {
		return err
	}
	defer m.Close()
	return m.Up(ctx)
}
