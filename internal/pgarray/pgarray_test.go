package pgarray_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/pgarray"
	"github.com/pgsched/pgsched/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestSameAsPgx sends each value twice in one statement, once as pgx
// encodes it and once converted, and has PostgreSQL compare them: NULL,
// empty, quotes, backslashes, commas, braces, multibyte text, and times
// in other zones and finer than a microsecond.
func TestSameAsPgx(t *testing.T) {
	t.Parallel()
	pool := pgtest.AdminPool(t)
	ctx := context.Background()
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	texts := [][]string{
		nil, {}, {""}, {"a", "b"}, {`q"uo'te`, `back\slash`, "com,ma", "{br}", "NULL", "ünï ☃", " lead"},
	}
	// Every way pgx sends parameters: bound in binary once it knows their
	// types, and as text without asking (exec and the simple protocol,
	// which deploy/README.md names for transaction pooling).
	modes := []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe,
		pgx.QueryExecModeDescribeExec, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol}
	times := [][]time.Time{
		nil, {}, {time.Date(2026, 11, 26, 17, 0, 0, 123456789, time.UTC), time.Date(2026, 3, 29, 2, 30, 0, 0, berlin), {}},
	}
	type sent struct {
		typ  string // the parameter's type
		v    any    // as the query passes it
		conv any    // the type Convert makes of it
		null bool
	}
	var cases []sent
	for _, v := range texts {
		cases = append(cases, sent{"text[]", v, pgarray.Text(nil), v == nil})
	}
	for _, v := range times {
		cases = append(cases, sent{"timestamptz[]", v, pgarray.Timestamptz(nil), v == nil})
	}
	for _, mode := range modes {
		for _, c := range cases {
			var same, null bool
			args := []any{mode, c.v, c.v}
			pgarray.Convert(args[2:])
			require.IsType(t, c.conv, args[2])
			q := fmt.Sprintf("SELECT $1::%[1]s IS NOT DISTINCT FROM $2::%[1]s, $2::%[1]s IS NULL", c.typ)
			require.NoError(t, pool.QueryRow(ctx, q, args...).Scan(&same, &null))
			require.True(t, same, "%v %v", mode, c.v)
			require.Equal(t, c.null, null, "%v %v", mode, c.v)
		}
	}
	docs := [][]byte{[]byte(`{"n": 1}`), nil, []byte(`"text, with \\ and \"quotes\""`), []byte(`[1, {"a": null}]`)}
	texts2 := []*string{ptr(`{"n": 1}`), nil, ptr(`"text, with \\ and \"quotes\""`), ptr(`[1, {"a": null}]`)}
	for _, mode := range modes {
		for _, v := range [][][]byte{nil, {}, docs} {
			var same bool
			args := []any{mode, v, texts2[:len(v)]}
			if v == nil {
				args[2] = []*string(nil)
			}
			pgarray.Convert(args[1:2])
			require.IsType(t, pgarray.JSONB(nil), args[1])
			require.NoError(t, pool.QueryRow(ctx, "SELECT $1::jsonb[] IS NOT DISTINCT FROM $2::text[]::jsonb[]", args...).Scan(&same))
			require.True(t, same, "%v %q", mode, v)
		}
		for _, v := range [][]byte{nil, []byte(`{"n": [1, 2]}`)} {
			var got *string
			args := []any{mode, v}
			pgarray.Convert(args[1:])
			require.NoError(t, pool.QueryRow(ctx, "SELECT $1::jsonb::text", args...).Scan(&got))
			if v == nil {
				require.Nil(t, got, "%v", mode)
			} else {
				require.Equal(t, string(v), *got, "%v", mode)
			}
		}
	}

	// Through Wrap, as the store sends them.
	var got []string
	require.NoError(t, pgarray.Wrap(pool).QueryRow(ctx, "SELECT $1::text[]", []string{"x", "y"}).Scan(&got))
	require.Equal(t, []string{"x", "y"}, got)
}

// TestQueriesTakeWhatConvertSends guards what Wrap assumes: sqlc gives a
// []string only to a text[] parameter, a []time.Time only to a
// timestamptz[] one, a [][]byte only to jsonb[] and a []byte only to
// jsonb. An array parameter of another type (varchar[], timestamp[],
// bytea[] ...) or a bytea one would reach Convert as one of those all the
// same and be sent with the wrong encoder: allow it below only once
// Convert leaves it alone or encodes it right.
func TestQueriesTakeWhatConvertSends(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../db/queries/*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	param := regexp.MustCompile(`sqlc\.n?arg\(\w+\)(::[\w.]+(\[\])?)?`)
	allowed := map[string]bool{
		"::text[]": true, "::timestamptz[]": true, // converted
		"::integer[]": true, "::bigint[]": true, "::jsonb[]": true, "::float8[]": true, "::boolean[]": true, // left alone
	}
	arrays := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range param.FindAllStringSubmatch(string(b), -1) {
			require.NotEmpty(t, m[1], "%s: %s has no cast: sqlc would guess its type", f, m[0])
			if m[2] == "" {
				continue
			}
			arrays++
			require.True(t, allowed[m[1]], "%s: %s", f, m[0])
		}
		require.NotContains(t, string(b), "::bytea", "%s: Convert sends a []byte as jsonb text", f)
	}
	require.Greater(t, arrays, 10, "the pattern no longer finds the queries' array parameters")
}

func ptr(s string) *string { return &s }
