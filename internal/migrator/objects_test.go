package migrator_test

import (
	"context"
	"io/fs"
	"path"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sqlfiles "github.com/pgsched/pgsched/db"
	"github.com/pgsched/pgsched/internal/migrator"
	"github.com/pgsched/pgsched/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestObjectsApplied: the functions and views of db/functions and db/views
// are applied after the migrations; an Up with the same files changes
// nothing; an Up after they changed replaces functions in place, replaces
// one whose return type changed, drops a function no file defines, and
// creates the views again.
func TestObjectsApplied(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	s := db.Schema
	admin := pgtest.AdminPool(t)

	version := func(fn string) string {
		var v string
		require.NoError(t, admin.QueryRow(ctx, `SELECT p.xmin::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
			WHERE n.nspname = $1 AND p.proname = $2`, s, fn).Scan(&v))
		return v
	}
	count := func(query string, args ...any) int {
		var n int
		require.NoError(t, admin.QueryRow(ctx, query, args...).Scan(&n))
		return n
	}
	functions := func() int {
		return count(`SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1`, s)
	}
	// Every file of db/functions and db/views, one function or view each,
	// and on Citus those of db/citus too (replacing the same names).
	files := func(pattern string) int {
		names := map[string]bool{}
		dirs := []string{""}
		if pgtest.Citus() {
			dirs = append(dirs, "citus/")
		}
		for _, dir := range dirs {
			found, err := fs.Glob(sqlfiles.Objects, dir+pattern)
			require.NoError(t, err)
			for _, f := range found {
				names[path.Base(f)] = true
			}
		}
		return len(names)
	}
	nFunctions := functions()
	require.Equal(t, files("functions/*.sql"), nFunctions, "every file of db/functions (one function each)")
	require.Equal(t, files("views/*.sql"), count(`SELECT count(*) FROM pg_views WHERE schemaname = $1`, s), "every file of db/views")

	before := version("finish_tasks")
	require.NoError(t, migrator.Up(ctx, db.URL, migrator.Options{Schema: s}))
	require.Equal(t, before, version("finish_tasks"), "the same files: nothing touched")

	// As if the files had changed: a function no file defines, one whose
	// return type differs from its file's, and a forgotten checksum.
	_, err := admin.Exec(ctx, "CREATE FUNCTION "+s+".retired() RETURNS integer LANGUAGE sql AS 'SELECT 1'")
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "DROP FUNCTION "+s+".partition_of(text, integer) CASCADE")
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "CREATE FUNCTION "+s+".partition_of(ordering_id text, partition_count integer) RETURNS bigint LANGUAGE sql AS 'SELECT 0::bigint'")
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "DROP VIEW "+s+".pending")
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "UPDATE "+s+".sql_objects SET checksum = 'old'")
	require.NoError(t, err)

	require.NoError(t, migrator.Up(ctx, db.URL, migrator.Options{Schema: s}))
	require.NotEqual(t, before, version("finish_tasks"), "replaced in place")
	require.Equal(t, nFunctions, functions(), "the retired function is gone")
	require.Equal(t, "integer", func() string {
		var typ string
		require.NoError(t, admin.QueryRow(ctx, "SELECT pg_typeof("+s+".partition_of('x', 8))::text").Scan(&typ))
		return typ
	}(), "the function with a changed return type was replaced")
	require.Equal(t, 1, count("SELECT count(*) FROM pg_views WHERE schemaname = $1 AND viewname = 'pending'", s))
	_, err = admin.Exec(ctx, "SELECT "+s+".schedule('x', now())")
	require.NoError(t, err, "the API works")
}
