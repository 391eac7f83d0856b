package pgarray_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

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
	for _, v := range texts {
		var same, null bool
		args := []any{v, v}
		pgarray.Convert(args[1:])
		require.IsType(t, pgarray.Text(nil), args[1])
		require.NoError(t, pool.QueryRow(ctx, "SELECT $1::text[] IS NOT DISTINCT FROM $2::text[], $2::text[] IS NULL", args...).Scan(&same, &null))
		require.True(t, same, "%q", v)
		require.Equal(t, v == nil, null, "%q", v)
	}
	times := [][]time.Time{
		nil, {}, {time.Date(2026, 11, 26, 17, 0, 0, 123456789, time.UTC), time.Date(2026, 3, 29, 2, 30, 0, 0, berlin), {}},
	}
	for _, v := range times {
		var same, null bool
		args := []any{v, v}
		pgarray.Convert(args[1:])
		require.IsType(t, pgarray.Timestamptz(nil), args[1])
		require.NoError(t, pool.QueryRow(ctx, "SELECT $1::timestamptz[] IS NOT DISTINCT FROM $2::timestamptz[], $2::timestamptz[] IS NULL", args...).Scan(&same, &null))
		require.True(t, same, "%v", v)
		require.Equal(t, v == nil, null, "%v", v)
	}
	// Through Wrap, as the store sends them.
	var got []string
	require.NoError(t, pgarray.Wrap(pool).QueryRow(ctx, "SELECT $1::text[]", []string{"x", "y"}).Scan(&got))
	require.Equal(t, []string{"x", "y"}, got)
}

// TestEveryArrayParameterIsTextOrTimestamptz guards what Wrap assumes:
// sqlc gives a []string only to a text[] parameter and a []time.Time only
// to a timestamptz[] one. An array parameter of another type (varchar[],
// timestamp[], name[] ...) would reach Convert as a []string or
// []time.Time all the same and be sent with the wrong encoder: add it to
// the list below only once Convert leaves it alone or encodes it right.
func TestEveryArrayParameterIsTextOrTimestamptz(t *testing.T) {
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
	}
	require.Greater(t, arrays, 10, "the pattern no longer finds the queries' array parameters")
}
