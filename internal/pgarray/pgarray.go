// Package pgarray sends the text[] and timestamptz[] parameters of
// pgsched's hot statements without a heap allocation per element.
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
// TimestamptzValuer interfaces: the bytes sent are the same.
//
// Wrap applies them to every statement of a DBTX. It converts []string and
// []time.Time arguments only, which pgsched's queries send as text[] and
// timestamptz[] (TestEveryArrayParameterIsTextOrTimestamptz in
// internal/store checks the queries).
package pgarray

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// Text is a []string sent as text[] without boxing its elements.
type Text []string

// Dimensions says how pgx lays the array out: nil is SQL NULL.
func (a Text) Dimensions() []pgtype.ArrayDimension {
	if a == nil {
		return nil
	}
	return []pgtype.ArrayDimension{{Length: int32(len(a)), LowerBound: 1}}
}

// Index returns a pointer to element i, which an interface holds without
// allocating.
func (a Text) Index(i int) any { return (*text)(&a[i]) }

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
func (a Timestamptz) Dimensions() []pgtype.ArrayDimension {
	if a == nil {
		return nil
	}
	return []pgtype.ArrayDimension{{Length: int32(len(a)), LowerBound: 1}}
}

// Index returns a pointer to element i, which an interface holds without
// allocating.
func (a Timestamptz) Index(i int) any { return (*timestamptz)(&a[i]) }

// IndexType tells pgx which encoder the elements take.
func (a Timestamptz) IndexType() any { return (*timestamptz)(nil) }

type timestamptz time.Time

// TimestamptzValue lets pgx's timestamptz encoder read the element in
// place.
func (t *timestamptz) TimestamptzValue() (pgtype.Timestamptz, error) {
	return pgtype.Timestamptz{Time: time.Time(*t), Valid: true}, nil
}

// Convert replaces, in place, the []string and []time.Time values of args
// with Text and Timestamptz.
func Convert(args []any) {
	for i, a := range args {
		switch v := a.(type) {
		case []string:
			args[i] = Text(v)
		case []time.Time:
			args[i] = Timestamptz(v)
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
