// Package migrator applies pgsched's embedded SQL to a schema of the
// caller's choice: the goose migrations (tables, indexes, sequences), then
// the functions and views of db/functions and db/views (objects.go).
//
// The SQL files are written against the schema "pgsched"; they are rewritten
// on the fly for another schema (see internal/sqlschema), and goose keeps its
// version table inside that schema, so several installations (or tests) can
// share one database. The partition count is chosen here, once: it reaches the
// first migration through the session setting <schema>.partition_count.
//
// Two replicas migrating at the same moment are safe: goose's Postgres
// session locker (an advisory lock keyed by the schema) lets one apply and
// the other find nothing left to do.
package migrator

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/pgsched/pgsched/db"
	"github.com/pgsched/pgsched/internal/schemaversion"
	"github.com/pgsched/pgsched/internal/sqlschema"
)

// DefaultPartitions is the number of logical partitions when none is chosen.
const DefaultPartitions = 64

// Options says where and how to migrate.
type Options struct {
	// Schema holds pgsched's tables. Defaults to "pgsched".
	Schema string
	// Partitions is the fixed number of logical partitions, used only when
	// the schema is first created. Defaults to 64; at most 4096.
	Partitions int
	// TablePartitions is how many physical partitions heads and backlog are
	// split into (each holding every TablePartitions-th logical partition),
	// used only when the schema is first created. Defaults to 2 (or
	// Partitions, if fewer); with Citus to 1, since each shard holds one
	// logical partition and would keep all but one physical partition
	// empty.
	TablePartitions int
	// Citus distributes the schema over a Citus cluster (see
	// db/functions/citus_distribute.sql): Up is run on the coordinator.
	// A schema distributed once stays so: later Ups distribute what they
	// add without being asked.
	Citus bool
	// Roles creates the roles <schema>_enqueue, <schema>_worker and
	// <schema>_read (see db/functions/grant_roles.sql) and grants them
	// their privileges; needs the CREATEROLE privilege.
	Roles bool
	// Logger receives one line per applied migration. Defaults to discarding.
	Logger *slog.Logger
	// Upgrade names what to upgrade when the schema is newer than this
	// build (see schemaversion). Defaults to "pgsched".
	Upgrade string
}

// Check reports what is wrong with o, without changing it.
func (o Options) Check() error { return o.fill() }

func (o *Options) fill() error {
	if o.Schema == "" {
		o.Schema = sqlschema.Default
	}
	if err := sqlschema.Validate(o.Schema); err != nil {
		return err
	}
	// PostgreSQL cuts names at 63 bytes: <schema>_enqueue must fit.
	if o.Roles && len(o.Schema)+len("_enqueue") > 63 {
		return fmt.Errorf("with roles the schema name may be at most %d bytes (its roles are <schema>_enqueue, _worker, _read), got %d", 63-len("_enqueue"), len(o.Schema))
	}
	if o.Partitions == 0 {
		o.Partitions = DefaultPartitions
	}
	if o.Partitions < 1 || o.Partitions > 4096 {
		return fmt.Errorf("partitions must be between 1 and 4096, got %d", o.Partitions)
	}
	if o.TablePartitions == 0 {
		o.TablePartitions = min(2, o.Partitions)
		if o.Citus {
			o.TablePartitions = 1
		}
	}
	if o.TablePartitions < 1 || o.TablePartitions > o.Partitions {
		return fmt.Errorf("table partitions must be between 1 and the partition count %d, got %d", o.Partitions, o.TablePartitions)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Upgrade == "" {
		o.Upgrade = "pgsched"
	}
	return nil
}

// Migrator runs goose against one database and schema.
type Migrator struct {
	db       *sql.DB
	provider *goose.Provider
	opts     Options
}

// Open connects to databaseURL and prepares the migrations. Close it after use.
func Open(ctx context.Context, databaseURL string, opts Options) (*Migrator, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parsing database URL: %w", err)
	}
	return OpenConfig(ctx, cfg, opts)
}

// OpenConfig is Open with a parsed connection configuration, which it
// takes over (a caller passes a copy, such as a pool's
// Config().ConnConfig.Copy()).
func OpenConfig(ctx context.Context, cfg *pgx.ConnConfig, opts Options) (*Migrator, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams[opts.Schema+".partition_count"] = strconv.Itoa(opts.Partitions)
	cfg.RuntimeParams[opts.Schema+".table_partitions"] = strconv.Itoa(opts.TablePartitions)
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(2)

	if err := createSchema(ctx, db, opts.Schema); err != nil {
		db.Close()
		return nil, err
	}
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(lockID(opts.Schema)), lock.WithLockTimeout(1, 300))
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("creating migration lock: %w", err)
	}
	fsys, err := rewrittenFS(opts.Schema)
	if err != nil {
		db.Close()
		return nil, err
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, fsys,
		goose.WithTableName(opts.Schema+".goose_db_version"), goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("loading migrations: %w", err)
	}
	return &Migrator{db: db, provider: provider, opts: opts}, nil
}

// Close releases the database connections.
func (m *Migrator) Close() error { return m.db.Close() }

// Up applies every pending migration, then the functions and views of
// db/functions and db/views when they changed (see objects.go), and
// creates the completion partitions for today and the days ahead.
func (m *Migrator) Up(ctx context.Context) error {
	// Again here, not only at Open: the schema may have been dropped since.
	if err := createSchema(ctx, m.db, m.opts.Schema); err != nil {
		return err
	}
	// goose finds nothing to do on a schema a newer build migrated, and
	// this build's functions and views would then replace that build's
	// (and drop those it added): refuse first. applyObjects checks again
	// under the lock, for a newer build migrating right now.
	if err := m.checkNotNewer(ctx, m.db); err != nil {
		return err
	}
	res, err := m.provider.Up(ctx)
	m.log(res...)
	if err != nil {
		return fmt.Errorf("migrating %s up: %w", m.opts.Schema, err)
	}
	changed, citus, err := m.applyObjects(ctx)
	if err != nil {
		return fmt.Errorf("applying the functions and views of %s: %w", m.opts.Schema, err)
	}
	// Privileges follow every change (a function created anew, a new table
	// or view starts with defaults); with nothing changed a role without
	// the right to grant, such as <schema>_worker, can still run Up.
	for _, r := range res {
		if r != nil && !r.Empty {
			changed = true
		}
	}
	if changed || m.opts.Roles {
		if err := m.grantRoles(ctx); err != nil {
			return fmt.Errorf("granting privileges in %s: %w", m.opts.Schema, err)
		}
		if m.opts.Roles {
			m.opts.Logger.Info("roles ready", "schema", m.opts.Schema,
				"enqueue", m.opts.Schema+"_enqueue", "worker", m.opts.Schema+"_worker", "read", m.opts.Schema+"_read")
		}
	}
	if citus {
		if err := m.distribute(ctx); err != nil {
			return err
		}
	}
	if _, err := m.db.ExecContext(ctx, "SELECT "+pgx.Identifier{m.opts.Schema}.Sanitize()+".ensure_completion_partitions(now() - interval '1 day', 8)"); err != nil {
		return fmt.Errorf("creating completion partitions in %s: %w", m.opts.Schema, err)
	}
	return nil
}

// distribute spreads the schema over Citus (what a later migration added,
// when it is distributed already), gives each partition a shard of its
// own and delegates the nodes' calls to the Citus workers; see
// db/citus/functions/citus_*.sql.
func (m *Migrator) distribute(ctx context.Context) error {
	var distributed int
	if err := m.db.QueryRowContext(ctx, "SELECT "+pgx.Identifier{m.opts.Schema}.Sanitize()+".citus_distribute($1)", m.opts.Citus).Scan(&distributed); err != nil {
		return fmt.Errorf("distributing %s over Citus: %w", m.opts.Schema, err)
	}
	var split bool
	if err := m.db.QueryRowContext(ctx, "SELECT "+pgx.Identifier{m.opts.Schema}.Sanitize()+".citus_split_partitions()").Scan(&split); err != nil {
		return fmt.Errorf("giving each partition of %s a Citus shard: %w", m.opts.Schema, err)
	}
	if distributed > 0 || split {
		m.opts.Logger.Info("tables distributed over Citus", "schema", m.opts.Schema, "tables", distributed, "shard_per_partition", split)
	}
	var delegated int
	if err := m.db.QueryRowContext(ctx, "SELECT "+pgx.Identifier{m.opts.Schema}.Sanitize()+".citus_delegate()").Scan(&delegated); err != nil {
		return fmt.Errorf("delegating the calls of %s to the Citus workers: %w", m.opts.Schema, err)
	}
	if delegated > 0 {
		m.opts.Logger.Info("functions distributed over Citus", "schema", m.opts.Schema, "functions", delegated)
	}
	return nil
}

// Down drops the functions and views (the next Up brings them back) and
// rolls back the newest applied migration.
func (m *Migrator) Down(ctx context.Context) error {
	// This build knows neither the newer migrations' Down nor their objects.
	if err := m.checkNotNewer(ctx, m.db); err != nil {
		return err
	}
	if err := m.dropObjects(ctx); err != nil {
		return err
	}
	res, err := m.provider.Down(ctx)
	if res != nil {
		m.log(res)
	}
	if err != nil {
		return fmt.Errorf("migrating %s down: %w", m.opts.Schema, err)
	}
	return nil
}

// Reset drops the functions and views and rolls back every applied
// migration.
func (m *Migrator) Reset(ctx context.Context) error {
	if err := m.checkNotNewer(ctx, m.db); err != nil {
		return err
	}
	if err := m.dropObjects(ctx); err != nil {
		return err
	}
	res, err := m.provider.DownTo(ctx, 0)
	m.log(res...)
	if err != nil {
		return fmt.Errorf("resetting %s: %w", m.opts.Schema, err)
	}
	return nil
}

// Drop drops the schema with everything in it: tables, functions, views
// and the migration history. For throwaway schemas (tests); every task is
// gone.
func (m *Migrator) Drop(ctx context.Context) error {
	if _, err := m.db.ExecContext(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{m.opts.Schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("dropping schema %s: %w", m.opts.Schema, err)
	}
	return nil
}

// Status is one migration's state.
type Status struct {
	Version   int64
	Name      string
	Applied   bool
	AppliedAt time.Time
	// Newer: applied by a newer build; this one does not know it (Name is
	// empty).
	Newer bool
}

// Status lists every known migration and whether it is applied. On a
// schema a newer build migrated, the list ends with the versions this
// build does not know (Newer), and the error is a
// *schemaversion.NewerError saying so.
func (m *Migrator) Status(ctx context.Context) ([]Status, error) {
	st, err := m.provider.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading migration status: %w", err)
	}
	out := make([]Status, 0, len(st))
	for _, s := range st {
		out = append(out, Status{
			Version:   s.Source.Version,
			Name:      s.Source.Path,
			Applied:   s.State == goose.StateApplied,
			AppliedAt: s.AppliedAt,
		})
	}
	newer, err := m.newerVersions(ctx)
	if err != nil {
		return nil, err
	}
	out = append(out, newer...)
	if len(newer) > 0 {
		return out, schemaversion.Check(newer[len(newer)-1].Version, m.opts.Upgrade)
	}
	return out, nil
}

// queryer is a *sql.DB or *sql.Tx.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// versionTable is goose's version table, quoted.
func (m *Migrator) versionTable() string {
	return pgx.Identifier{m.opts.Schema, "goose_db_version"}.Sanitize()
}

// checkNotNewer refuses a schema a newer build migrated (a
// *schemaversion.NewerError); one without goose's table yet is version 0.
func (m *Migrator) checkNotNewer(ctx context.Context, q queryer) error {
	var exists bool
	if err := q.QueryRowContext(ctx, "SELECT to_regclass($1) IS NOT NULL", m.versionTable()).Scan(&exists); err != nil {
		return fmt.Errorf("reading the schema version of %s: %w", m.opts.Schema, err)
	}
	if !exists {
		return nil
	}
	var version int64
	if err := q.QueryRowContext(ctx, "SELECT coalesce(max(version_id), 0) FROM "+m.versionTable()).Scan(&version); err != nil {
		return fmt.Errorf("reading the schema version of %s: %w", m.opts.Schema, err)
	}
	return schemaversion.Check(version, m.opts.Upgrade)
}

// newerVersions lists the applied versions past this build, in order.
func (m *Migrator) newerVersions(ctx context.Context) ([]Status, error) {
	rows, err := m.db.QueryContext(ctx, "SELECT version_id, max(tstamp) FROM "+m.versionTable()+
		" WHERE version_id > $1 GROUP BY version_id ORDER BY version_id", schemaversion.Latest())
	if err != nil {
		return nil, fmt.Errorf("reading migration status: %w", err)
	}
	defer rows.Close()
	var out []Status
	for rows.Next() {
		s := Status{Applied: true, Newer: true}
		if err := rows.Scan(&s.Version, &s.AppliedAt); err != nil {
			return nil, fmt.Errorf("reading migration status: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading migration status: %w", err)
	}
	return out, nil
}

func (m *Migrator) log(results ...*goose.MigrationResult) {
	for _, r := range results {
		if r == nil || r.Empty {
			continue
		}
		m.opts.Logger.Info("migration applied", "schema", m.opts.Schema, "version", r.Source.Version,
			"direction", r.Direction, "duration", r.Duration)
	}
}

// Up is Open, Up and Close in one call.
func Up(ctx context.Context, databaseURL string, opts Options) error {
	m, err := Open(ctx, databaseURL, opts)
	if err != nil {
		return err
	}
	defer m.Close()
	return m.Up(ctx)
}

// createSchema makes the schema goose keeps its version table in. Two
// processes racing on CREATE SCHEMA IF NOT EXISTS can still collide on the
// catalog's unique index; the loser simply finds the schema there.
func createSchema(ctx context.Context, db *sql.DB, schema string) error {
	var err error
	for range 3 {
		_, err = db.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+schema)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || (pgErr.Code != "23505" && pgErr.Code != "42P06") {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("creating schema %s: %w", schema, err)
	}
	return nil
}

func lockID(schema string) int64 {
	h := fnv.New64a()
	_, _ = io.WriteString(h, "pgsched-migrate:"+schema)
	return int64(h.Sum64() >> 1)
}

// grantRoles brings the schema's privileges up to date (grant_roles) under
// the schema's advisory lock: two processes migrating at once may both
// have changed something, and concurrent GRANTs on the same objects fail
// ("tuple concurrently updated").
func (m *Migrator) grantRoles(ctx context.Context) error {
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", lockID(m.opts.Schema)); err != nil {
		return err
	}
	var have bool
	if err := tx.QueryRowContext(ctx, "SELECT "+pgx.Identifier{m.opts.Schema}.Sanitize()+".grant_roles($1)", m.opts.Roles).Scan(&have); err != nil {
		return err
	}
	return tx.Commit()
}

// rewrittenFS returns the embedded migrations rewritten for schema.
func rewrittenFS(schema string) (fs.FS, error) {
	migrations, err := fs.Sub(db.Migrations, "migrations")
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	err = fs.WalkDir(migrations, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".sql") {
			return err
		}
		b, err := fs.ReadFile(migrations, path)
		if err != nil {
			return err
		}
		files[path] = []byte(sqlschema.Rewrite(string(b), schema))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading embedded migrations: %w", err)
	}
	return sqlFiles(files), nil
}

// sqlFiles is a flat, read-only file system of SQL files held in memory:
// what goose reads the migrations from.
type sqlFiles map[string][]byte

func (m sqlFiles) Open(name string) (fs.File, error) {
	if name == "." {
		entries, _ := m.ReadDir(".")
		return &sqlDir{entries: entries}, nil
	}
	b, ok := m[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &sqlFile{Reader: bytes.NewReader(b), info: sqlInfo{name: name, size: int64(len(b))}}, nil
}

func (m sqlFiles) ReadDir(name string) ([]fs.DirEntry, error) {
	if name != "." {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	out := make([]fs.DirEntry, 0, len(m))
	for n, b := range m {
		out = append(out, fs.FileInfoToDirEntry(sqlInfo{name: n, size: int64(len(b))}))
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

type sqlFile struct {
	*bytes.Reader
	info sqlInfo
}

func (f *sqlFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *sqlFile) Close() error               { return nil }

// sqlDir is the root directory, read in turn as fs.ReadDirFile says.
type sqlDir struct {
	entries []fs.DirEntry
	read    int
}

func (d *sqlDir) Stat() (fs.FileInfo, error) { return sqlInfo{name: ".", dir: true}, nil }
func (d *sqlDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: ".", Err: fs.ErrInvalid}
}
func (d *sqlDir) Close() error { return nil }
func (d *sqlDir) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.entries[d.read:]
	if n <= 0 {
		d.read = len(d.entries)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(rest))
	d.read += n
	return rest[:n], nil
}

type sqlInfo struct {
	name string
	size int64
	dir  bool
}

func (i sqlInfo) Name() string       { return i.name }
func (i sqlInfo) Size() int64        { return i.size }
func (i sqlInfo) ModTime() time.Time { return time.Time{} }
func (i sqlInfo) IsDir() bool        { return i.dir }
func (i sqlInfo) Sys() any           { return nil }
func (i sqlInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
