package migrator

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsched/pgsched/db"
	"github.com/pgsched/pgsched/internal/sqlschema"
)

// The SQL API and the views are not migrations: each lives in a file of
// its own under db/functions or db/views (a function's overloads share
// the file named after it; a view's file name starts with a number that
// orders it after the views it reads) and is applied after the
// migrations, so a
// change to one is a one-file diff. Applying is one transaction, under an
// advisory lock so replicas starting together apply once, and only when
// the files differ from what the schema last got (a checksum in
// sql_objects), so a restart with the same version touches nothing.
//
// Functions are created or replaced in place: their identity stays, and
// sessions calling them carry on. One whose return type changed cannot be
// replaced and is dropped first; any function of the schema that no file
// defines any more (removed, or an overload whose arguments changed) is
// dropped after. Views are dropped and created again, in an order their
// dependencies allow.

// On a schema distributed over Citus (migrate -citus, or a schema whose
// heads is distributed) the Citus tree, db/citus, comes on top: a file of
// db/citus/functions or db/citus/views replaces the file of the same name
// (a function Citus needs written otherwise: each statement naming one
// partition, so Citus routes it whole to the worker holding it, and a
// call spanning partitions split into one per partition) or adds one only
// Citus has (distribution, delegated calls, placement); then
// db/citus/custom_plans.sql alters the functions Citus must plan per call.
// Each variant is a whole file: what runs is what a reader sees.

// kind is what an object's file holds.
type kind int

const (
	function kind = iota // a function and its overloads
	after                // statements run once the functions are in place
	view
)

// object is one file of db/functions, db/views or db/citus, rewritten for
// a schema.
type object struct {
	name string // the function's or view's name: the file's base name
	kind kind
	file string // its path under db/, for errors
	sql  string
}

// objects reads the embedded functions and views, rewritten for schema
// (and, for Citus, the Citus tree on top), functions first, each group in
// name order.
func objects(schema string, citus bool) ([]object, error) {
	var out []object
	for _, k := range []kind{function, after, view} {
		byName := map[string]object{}
		trees := []string{""}
		if citus {
			trees = append(trees, "citus/")
		}
		for _, tree := range trees {
			pattern := map[kind]string{function: "functions/*.sql", view: "views/*.sql", after: "custom_plans.sql"}[k]
			names, err := fs.Glob(db.Objects, tree+pattern)
			if err != nil {
				return nil, err
			}
			for _, n := range names {
				b, err := fs.ReadFile(db.Objects, n)
				if err != nil {
					return nil, err
				}
				// A view's file name starts with a number that orders it
				// after the views it reads (sqlc reads them in name order
				// too).
				name := strings.TrimSuffix(path.Base(n), ".sql")
				order := name
				if i := strings.IndexByte(name, '_'); k == view && i > 0 && strings.Trim(name[:i], "0123456789") == "" {
					name = name[i+1:]
				}
				byName[order] = object{name: name, kind: k, file: "db/" + n, sql: sqlschema.Rewrite(string(b), schema)}
			}
		}
		for _, order := range slices.Sorted(maps.Keys(byName)) {
			out = append(out, byName[order])
		}
	}
	return out, nil
}

func checksum(objs []object) string {
	h := sha256.New()
	for _, o := range objs {
		fmt.Fprintf(h, "%d %s %d\n%s", o.kind, o.name, len(o.sql), o.sql)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// distributed reports whether the functions are to be built for Citus:
// asked to distribute (Options.Citus), or the schema's heads is
// distributed already.
func (m *Migrator) distributed(ctx context.Context) (bool, error) {
	if m.opts.Citus {
		return true, nil
	}
	var citus bool
	if err := m.db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')").Scan(&citus); err != nil || !citus {
		return false, err
	}
	err := m.db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass($1))",
		m.opts.Schema+".heads").Scan(&citus)
	return citus, err
}

// applyObjects brings the schema's functions and views up to the files;
// citus says whether they were Citus's.
func (m *Migrator) applyObjects(ctx context.Context) (changed, citus bool, err error) {
	citus, err = m.distributed(ctx)
	if err != nil {
		return false, false, err
	}
	objs, err := objects(m.opts.Schema, citus)
	if err != nil {
		return false, citus, fmt.Errorf("reading the embedded functions and views: %w", err)
	}
	sum := checksum(objs)
	schema := pgx.Identifier{m.opts.Schema}.Sanitize()
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return false, citus, err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", lockID(m.opts.Schema)); err != nil {
		return false, citus, err
	}
	// Under the lock: a newer build may have migrated since Up looked.
	if err := m.checkNotNewer(ctx, tx); err != nil {
		return false, citus, err
	}
	// As pg_dump does: a function's body may call one created after it.
	if _, err := tx.ExecContext(ctx, "SET LOCAL check_function_bodies = off"); err != nil {
		return false, citus, err
	}
	var current string
	err = tx.QueryRowContext(ctx, "SELECT checksum FROM "+schema+".sql_objects").Scan(&current)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, citus, err
	}
	if current == sum {
		return false, citus, tx.Commit()
	}
	if err := dropViews(ctx, tx, m.opts.Schema); err != nil {
		return false, citus, err
	}
	before, err := functionVersions(ctx, tx, m.opts.Schema)
	if err != nil {
		return false, citus, err
	}
	var views []object
	for _, o := range objs {
		switch o.kind {
		case view:
			views = append(views, o)
		case after:
			if err := inSavepoint(ctx, tx, o.sql); err != nil {
				return false, citus, fmt.Errorf("%s: %w", o.file, err)
			}
		default:
			if err := createFunction(ctx, tx, m.opts.Schema, o); err != nil {
				return false, citus, err
			}
		}
	}
	if err := dropStaleFunctions(ctx, tx, m.opts.Schema, before); err != nil {
		return false, citus, err
	}
	if err := createViews(ctx, tx, views); err != nil {
		return false, citus, err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+schema+".sql_objects (checksum) VALUES ($1) "+
		"ON CONFLICT (singleton) DO UPDATE SET checksum = excluded.checksum, applied_at = now()", sum); err != nil {
		return false, citus, err
	}
	if err := tx.Commit(); err != nil {
		return false, citus, err
	}
	m.opts.Logger.Info("functions and views applied", "schema", m.opts.Schema, "functions", len(objs)-len(views), "views", len(views),
		"citus", citus)
	return true, citus, nil
}

// createFunction runs a function's file. A function whose return type
// changed cannot be replaced (SQLSTATE 42P13): its overloads are dropped
// and the file runs again.
func createFunction(ctx context.Context, tx *sql.Tx, schema string, o object) error {
	err := inSavepoint(ctx, tx, o.sql)
	if code(err) == "42P13" {
		if err = dropFunction(ctx, tx, schema, o.name); err == nil {
			err = inSavepoint(ctx, tx, o.sql)
		}
	}
	if err != nil {
		return fmt.Errorf("function %s (%s): %w", o.name, o.file, err)
	}
	return nil
}

// dropFunction drops every overload of a function of schema.
func dropFunction(ctx context.Context, tx *sql.Tx, schema, name string) error {
	return execEach(ctx, tx, `SELECT format('DROP FUNCTION %s', p.oid::regprocedure)
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = $1 AND p.proname = $2`, schema, name)
}

// functionVersions returns each function of schema by its signature,
// with the version of its catalog row (xmin), which creating or replacing
// it changes.
func functionVersions(ctx context.Context, tx *sql.Tx, schema string) (map[string]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT p.oid::regprocedure::text, p.xmin::text
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1`, schema)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var sig, version string
		if err := rows.Scan(&sig, &version); err != nil {
			return nil, err
		}
		out[sig] = version
	}
	return out, rows.Err()
}

// dropStaleFunctions drops the functions of schema that were there before
// and that no file created or replaced since: no file defines them any
// more.
func dropStaleFunctions(ctx context.Context, tx *sql.Tx, schema string, before map[string]string) error {
	after, err := functionVersions(ctx, tx, schema)
	if err != nil {
		return err
	}
	for sig, version := range after {
		if before[sig] == version {
			if _, err := tx.ExecContext(ctx, "DROP FUNCTION "+sig); err != nil {
				return fmt.Errorf("dropping %s, which no file defines any more: %w", sig, err)
			}
		}
	}
	return nil
}

// dropViews drops every view of schema.
func dropViews(ctx context.Context, tx *sql.Tx, schema string) error {
	return execEach(ctx, tx, `SELECT format('DROP VIEW IF EXISTS %I.%I CASCADE', schemaname, viewname)
		FROM pg_views WHERE schemaname = $1`, schema)
}

// createViews creates views in name order, putting off one that reads a
// view not created yet (SQLSTATE 42P01) until the others are there.
func createViews(ctx context.Context, tx *sql.Tx, views []object) error {
	for len(views) > 0 {
		var later []object
		var lastErr error
		for _, v := range views {
			err := inSavepoint(ctx, tx, v.sql)
			switch {
			case err == nil:
			case code(err) == "42P01":
				later, lastErr = append(later, v), err
			default:
				return fmt.Errorf("view %s (%s): %w", v.name, v.file, err)
			}
		}
		if len(later) == len(views) {
			return fmt.Errorf("views %v read a relation that does not exist: %w", names(later), lastErr)
		}
		views = later
	}
	return nil
}

// dropObjects drops every function and view of the schema and forgets
// what was applied, so the next Up applies them again.
func (m *Migrator) dropObjects(ctx context.Context) error {
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := dropViews(ctx, tx, m.opts.Schema); err != nil {
		return err
	}
	err = execEach(ctx, tx, `SELECT format('DROP FUNCTION %s', p.oid::regprocedure)
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1`, m.opts.Schema)
	if err != nil {
		return err
	}
	// Below migration 00003 there is no sql_objects to forget them in; a
	// failed DELETE would abort the transaction, so look first.
	var tracked bool
	if err := tx.QueryRowContext(ctx, "SELECT to_regclass($1) IS NOT NULL",
		pgx.Identifier{m.opts.Schema, "sql_objects"}.Sanitize()).Scan(&tracked); err != nil {
		return err
	}
	if tracked {
		if _, err := tx.ExecContext(ctx, "DELETE FROM "+pgx.Identifier{m.opts.Schema}.Sanitize()+".sql_objects"); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("dropping the functions and views of %s: %w", m.opts.Schema, err)
	}
	return nil
}

// execEach runs every statement the query returns.
func execEach(ctx context.Context, tx *sql.Tx, query string, args ...any) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	var stmts []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return err
		}
		stmts = append(stmts, s)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// inSavepoint runs sql so that its failure leaves the transaction usable.
func inSavepoint(ctx context.Context, tx *sql.Tx, sql string) error {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT object"); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, sql); err != nil {
		if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT object"); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	_, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT object")
	return err
}

func code(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

func names(objs []object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.name
	}
	return out
}
