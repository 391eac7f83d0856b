// Package pgarray sends the text[] and timestamptz[] parameters of
// pgsched's hot statements without a heap allocation per element, and its
// jsonb ones readably in every pgx query mode.
//
// pgx encodes a []string or []time.Time parameter through its generic
// array plan, which asks for each element as an interface value: every
// string and every time.Time is boxed on the way, and a time.Time twice
// (once more to reach the timestamptz encoder). A finish sends a task's
// ordering_id, outcome and claim time, an enqueue its ordering_id,
// uniqueness key, kind and scheduled time, so these boxes were a third of
// the worker's allocations per task. The arrays here hand pgx a pointer
// to each element instead, which an interface holds without allocating,
// and the element types encode themselves through pgx's TextValuer and
// TimestamptzValuer interfaces: the bytes sent are the same. Where pgx
// sends parameters without asking their types (the exec and simple
// protocol modes), it gets the plain slice back and encodes it as before.
//
// Wrap applies them to every statement of a DBTX. It converts []string,
// []time.Time, [][]byte and []byte arguments, which pgsched's queries take
// as text[], timestamptz[], jsonb[] and jsonb only
// (TestQueriesTakeWhatConvertSends checks the queries).
package pgarray

import (
	"context"
	"database/sql/driver"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// Text is a []string sent as text[] without boxing its elements.
type Text []string

// Dimensions says how pgx lays the array out: nil is SQL NULL.
func (a Text) Dimensions() []pgtype.ArrayDimension { return dimensions(a == nil, len(a)) }

// Index returns a pointer to element i, which an interface holds without
// allocating.
func (a Text) Index(i int) any { return (*text)(&a[i]) }

// Value hands pgx the plain []string where it sends a parameter without
// knowing its type (default_query_exec_mode exec or simple_protocol, as
// behind a transaction pooler): it encodes those by Go type, and knows
// []string but not Text.
func (a Text) Value() (driver.Value, error) {
	if a == nil {
		return nil, nil
	}
	return []string(a), nil
}

// IndexType tells pgx which encoder the elements take.
func (a Text) IndexType() any { return (*text)(nil) }

type text string

// TextValue lets pgx's text encoder read the element in place.
func (t *text) TextValue() (pgtype.Text, error) {
	return pgtype.Text{String: string(*t), Valid: true}, nil
}

// Timestamptz is a []time.Time sent as timestamptz[] without boxing its
// elements.
type Timestamptz []time.Time

// Dimensions says how pgx lays the array out: nil is SQL NULL.
func (a Timestamptz) Dimensions() []pgtype.ArrayDimension { return dimensions(a == nil, len(a)) }

// Index returns a pointer to element i, which an interface holds without
// allocating.
func (a Timestamptz) Index(i int) any { return (*timestamptz)(&a[i]) }

// Value hands pgx the plain []time.Time where it sends a parameter without
// knowing its type (see Text.Value).
func (a Timestamptz) Value() (driver.Value, error) {
	if a == nil {
		return nil, nil
	}
	return []time.Time(a), nil
}

// IndexType tells pgx which encoder the elements take.
func (a Timestamptz) IndexType() any { return (*timestamptz)(nil) }

type timestamptz time.Time

// TimestamptzValue lets pgx's timestamptz encoder read the element in
// place.
func (t *timestamptz) TimestamptzValue() (pgtype.Timestamptz, error) {
	return pgtype.Timestamptz{Time: time.Time(*t), Valid: true}, nil
}

// JSONB is a [][]byte of JSON documents sent as jsonb[]. Bound in binary
// it goes as pgx sends a [][]byte; only where pgx sends a parameter
// without knowing its type does it differ: pgx would send a [][]byte as
// bytea[] there, which PostgreSQL cannot read as jsonb[].
type JSONB [][]byte

// Dimensions says how pgx lays the array out: nil is SQL NULL.
func (a JSONB) Dimensions() []pgtype.ArrayDimension { return dimensions(a == nil, len(a)) }

// Index returns element i; a nil one is SQL NULL.
func (a JSONB) Index(i int) any { return a[i] }

// IndexType tells pgx which encoder the elements take.
func (a JSONB) IndexType() any { return []byte(nil) }

// Value hands pgx the documents as text where it sends a parameter
// without knowing its type (see Text.Value): text PostgreSQL reads as
// jsonb[] through the statement's cast.
func (a JSONB) Value() (driver.Value, error) {
	if a == nil {
		return nil, nil
	}
	out := make([]*string, len(a))
	for i, b := range a {
		if b != nil {
			s := string(b)
			out[i] = &s
		}
	}
	return out, nil
}

// dimensions lays out a one-dimensional array of n elements, or SQL NULL.
func dimensions(null bool, n int) []pgtype.ArrayDimension {
	if null {
		return nil
	}
	return []pgtype.ArrayDimension{{Length: int32(n), LowerBound: 1}}
}

// Convert replaces, in place, the []string, []time.Time and [][]byte
// values of args with Text, Timestamptz and JSONB, and a []byte (always a
// jsonb parameter in pgsched's queries) with a string, which pgx sends as
// the document's text in every mode (a []byte it would send as bytea
// where it does not ask the parameter's type).
func Convert(args []any) {
	for i, a := range args {
		switch v := a.(type) {
		case []string:
			args[i] = Text(v)
		case []time.Time:
			args[i] = Timestamptz(v)
		case [][]byte:
			args[i] = JSONB(v)
		case []byte:
			if v == nil {
				args[i] = nil
			} else {
				args[i] = string(v)
			}
		}
	}
}

// DBTX is what pgsched's generated queries run on.
type DBTX interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}

// Wrap returns db with its statements' array arguments converted.
func Wrap(db DBTX) DBTX { return wrapped{db} }

type wrapped struct{ db DBTX }

func (w wrapped) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	Convert(args)
	return w.db.Exec(ctx, sql, args...)
}

func (w wrapped) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	Convert(args)
	return w.db.Query(ctx, sql, args...)
}

func (w wrapped) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	Convert(args)
	return w.db.QueryRow(ctx, sql, args...)
}
