// Package sqlschema lets one set of SQL, written against the schema named
// "pgsched", run in any schema chosen at migrate time.
//
// Migrations, functions, views and sqlc queries name every object as
// pgsched.<name> (sqlc needs a concrete schema to type-check them). When an
// installation or a test uses another schema, statements are rewritten on
// their way to the server: the qualifier "pgsched." becomes "<schema>.".
// Only the qualifier: the product's name in text, such as the "pgsched:"
// that starts every error message, stays as it is; the notification
// channels ('pgsched.due') and settings ('pgsched.partition_count') are
// qualified names too and move with the schema, as they must. Rewritten
// statements are cached, so the hot path pays a map lookup, and nothing at
// all for the default schema.
package sqlschema

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Default is the schema the SQL is written against.
const Default = "pgsched"

// MaxLen is the longest schema name: the notification channels are named
// "<schema>.due" and "<schema>.assign", and a channel name, like every
// identifier, must fit PostgreSQL's 63 bytes.
const MaxLen = 63 - len(".assign")

var (
	validName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
	qualifier = regexp.MustCompile(`\bpgsched\.`)
)

// ErrInvalidName is returned for a schema name pgsched cannot use.
var ErrInvalidName = errors.New("invalid schema name")

// Validate checks that name can hold a pgsched installation: a lowercase SQL
// identifier of at most MaxLen bytes that every statement can use unquoted
// as a qualifier (no reserved keyword), in a schema of pgsched's own (not
// public, information_schema or a pg_ system schema, whose objects pgsched's
// would mix with or which PostgreSQL refuses to create).
func Validate(name string) error {
	if !validName.MatchString(name) || len(name) > MaxLen {
		return fmt.Errorf("%w %q: use lowercase letters, digits and _, not starting with a digit, at most %d bytes (the notification channel %s.assign must fit PostgreSQL's 63-byte names)",
			ErrInvalidName, name, MaxLen, name)
	}
	if _, ok := reservedWords[name]; ok {
		return fmt.Errorf("%w %q: it is a PostgreSQL keyword that cannot qualify a table or function name without quotes", ErrInvalidName, name)
	}
	if name == "public" || name == "information_schema" {
		return fmt.Errorf("%w %q: it is a schema PostgreSQL creates itself; pgsched needs a schema of its own", ErrInvalidName, name)
	}
	if strings.HasPrefix(name, "pg_") {
		return fmt.Errorf("%w %q: names starting with pg_ are reserved for PostgreSQL's system schemas", ErrInvalidName, name)
	}
	return nil
}

// Rewrite returns sql with the default schema replaced by schema.
func Rewrite(sql, schema string) string {
	if schema == Default || schema == "" {
		return sql
	}
	return qualifier.ReplaceAllLiteralString(sql, schema+".")
}

// DBTX is what sqlc-generated code runs statements on: a pool, a connection
// or a transaction.
type DBTX interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}

// Rewriter caches rewritten statements for one schema.
type Rewriter struct {
	schema string
	cache  sync.Map // string -> string
}

// NewRewriter returns a Rewriter for schema, which must pass Validate.
func NewRewriter(schema string) (*Rewriter, error) {
	if err := Validate(schema); err != nil {
		return nil, err
	}
	return &Rewriter{schema: schema}, nil
}

// Schema is the schema statements are rewritten into.
func (r *Rewriter) Schema() string { return r.schema }

// SQL returns sql rewritten for the schema.
func (r *Rewriter) SQL(sql string) string {
	if r.schema == Default {
		return sql
	}
	if v, ok := r.cache.Load(sql); ok {
		return v.(string)
	}
	out := Rewrite(sql, r.schema)
	r.cache.Store(sql, out)
	return out
}

// Wrap returns db with every statement rewritten for the schema.
func (r *Rewriter) Wrap(db DBTX) DBTX {
	if r.schema == Default {
		return db
	}
	return wrapped{db: db, r: r}
}

type wrapped struct {
	db DBTX
	r  *Rewriter
}

func (w wrapped) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return w.db.Exec(ctx, w.r.SQL(sql), args...)
}

func (w wrapped) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return w.db.Query(ctx, w.r.SQL(sql), args...)
}

func (w wrapped) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return w.db.QueryRow(ctx, w.r.SQL(sql), args...)
}
