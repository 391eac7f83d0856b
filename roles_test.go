package pgsched_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
)

// asRole runs f on a connection of the admin pool switched to role.
func asRole(t *testing.T, role string, f func(conn *pgxpool.Conn)) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgtest.AdminPool(t).Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, "SET ROLE "+role)
	require.NoError(t, err)
	defer func() { _, _ = conn.Exec(ctx, "RESET ROLE") }()
	f(conn)
}

// isPartition reports whether the schema's table name is a partition.
func isPartition(t *testing.T, schema, name string) bool {
	t.Helper()
	var is bool
	require.NoError(t, pgtest.AdminPool(t).QueryRow(context.Background(), `SELECT c.relispartition FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`, schema, name).Scan(&is))
	return is
}

func requireDenied(t *testing.T, err error, what string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "%s: want permission denied, got %v", what, err)
	require.Equal(t, "42501", pgErr.Code, "%s: %v", what, err)
}

// schemaObjects lists the schema's tables (with a column of each), views
// and functions (as a call with NULL arguments of the right types; for a
// strict function such a call may be folded to NULL unchecked, so
// requireNoExecute asks the catalog too).
func schemaObjects(t *testing.T, schema string) (tables map[string]string, views []string, calls map[string]string) {
	t.Helper()
	ctx := context.Background()
	admin := pgtest.AdminPool(t)
	tables = map[string]string{}
	rows, err := admin.Query(ctx, `SELECT c.relname, (SELECT a.attname FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum = 1)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind IN ('r', 'p')`, schema)
	require.NoError(t, err)
	for rows.Next() {
		var name, col string
		require.NoError(t, rows.Scan(&name, &col))
		tables[name] = col
	}
	require.NoError(t, rows.Err())
	rows, err = admin.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind = 'v'`, schema)
	require.NoError(t, err)
	views, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	calls = map[string]string{}
	rows, err = admin.Query(ctx, `SELECT p.proname, format('SELECT %s(%s)', p.oid::regproc,
			(SELECT coalesce(string_agg('NULL::' || format_type(t, NULL), ', '), '') FROM unnest(p.proargtypes::oid[]) AS t))
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1`, schema)
	require.NoError(t, err)
	for rows.Next() {
		var name, call string
		require.NoError(t, rows.Scan(&name, &call))
		calls[name] = call
	}
	require.NoError(t, rows.Err())
	require.Greater(t, len(tables), 10)
	require.Greater(t, len(views), 5)
	require.Greater(t, len(calls), 20)
	return tables, views, calls
}

var enqueueFuncs = map[string]bool{"schedule": true, "schedule_many": true, "cancel": true, "reschedule": true,
	"recurring_upsert": true, "recurring_pause": true, "recurring_resume": true, "recurring_delete": true}

// requireNoExecute: role may not execute the schema's function name, by
// the catalog and by calling it.
func requireNoExecute(t *testing.T, conn *pgxpool.Conn, role, schema, name, call string) {
	t.Helper()
	ctx := context.Background()
	var may bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT bool_or(has_function_privilege($1, p.oid, 'EXECUTE'))
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $2 AND p.proname = $3`,
		role, schema, name).Scan(&may))
	require.False(t, may, "%s may execute %s", role, name)
	if _, err := conn.Exec(ctx, call); err != nil {
		requireDenied(t, err, call)
	}
}

// TestRolesEnqueueAndRead: <schema>_enqueue schedules, reschedules and
// cancels, upserts, pauses, resumes and deletes recurring schedules, and
// every read or write of every table, every view and every
// other function is refused; <schema>_read reads every view and nothing
// else (on Citus, the tables under the views too; see grant_roles);
// <schema>_worker only reads partition_anchor.
func TestRolesEnqueueAndRead(t *testing.T) {
	t.Parallel()
	schema := pgtest.RolesSchema(t, "roles")
	ctx := context.Background()
	tables, views, calls := schemaObjects(t, schema)
	at := time.Now().Add(time.Hour)

	asRole(t, schema+"_enqueue", func(conn *pgxpool.Conn) {
		var res string
		require.NoError(t, conn.QueryRow(ctx, "SELECT "+schema+".schedule('a', $1)", at).Scan(&res))
		require.Equal(t, "inserted", res)
		_, err := conn.Exec(ctx, "SELECT "+schema+".schedule_many(ARRAY['b','c'], ARRAY[$1::timestamptz, $1])", at)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "SELECT "+schema+".reschedule('a', $1, '', $2)", at, at.Add(time.Minute))
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "SELECT "+schema+".cancel('b', $1)", at)
		require.NoError(t, err)
		// The recurring schedule functions it may call, each to its effect.
		for _, c := range []struct{ call, want string }{
			{"recurring_upsert('nightly', '0 3 * * *', 'report', '{\"v\": 1}')", "inserted"},
			{"recurring_upsert('nightly', '0 4 * * *', 'report', '{\"v\": 2}')", "updated"},
			{"recurring_pause('nightly')", "true"},
			{"recurring_resume('nightly')", "true"},
			{"recurring_upsert('gone', '@every 1h')", "inserted"},
			{"recurring_pause('gone')", "true"},
			{"recurring_delete('gone')", "true"},
		} {
			var got string
			require.NoError(t, conn.QueryRow(ctx, "SELECT "+schema+"."+c.call+"::text").Scan(&got), c.call)
			require.Equal(t, c.want, got, c.call)
		}
		// And not the ones a worker or an operator calls, with arguments
		// that would work for them.
		for _, call := range []string{
			"recurring_materialize('nightly', NULL, now() + interval '2 days', ARRAY[now() + interval '1 day'])",
			"cancel_running('a', now())",
			"pause_kind('report')",
		} {
			_, err := conn.Exec(ctx, "SELECT "+schema+"."+call)
			requireDenied(t, err, call)
		}
		for name, col := range tables {
			q := schema + "." + name
			for _, stmt := range []string{
				"SELECT * FROM " + q + " LIMIT 1",
				"INSERT INTO " + q + " DEFAULT VALUES",
				fmt.Sprintf("UPDATE %s SET %s = %s", q, col, col),
				"DELETE FROM " + q,
			} {
				_, err := conn.Exec(ctx, stmt)
				requireDenied(t, err, stmt)
			}
		}
		for _, v := range views {
			_, err := conn.Exec(ctx, "SELECT * FROM "+schema+"."+v+" LIMIT 1")
			requireDenied(t, err, v)
		}
		for name, call := range calls {
			if enqueueFuncs[name] {
				continue
			}
			requireNoExecute(t, conn, schema+"_enqueue", schema, name, call)
		}
	})

	asRole(t, schema+"_read", func(conn *pgxpool.Conn) {
		for _, v := range views {
			_, err := conn.Exec(ctx, "SELECT * FROM "+schema+"."+v+" LIMIT 1")
			require.NoError(t, err, v)
		}
		for name := range tables {
			_, err := conn.Exec(ctx, "SELECT * FROM "+schema+"."+name+" LIMIT 1")
			if pgtest.Citus() {
				// Partitions are read through their parents; those that
				// existed at the grant are readable, later ones not.
				if !isPartition(t, schema, name) {
					require.NoError(t, err, "on Citus the reader reads the tables the views read on the shards")
				}
				continue
			}
			requireDenied(t, err, name)
		}
		for name, call := range calls {
			if name == "partition_of" || name == "citus_partitions" || name == "recurring_ticks" { // views call them; they only compute or read
				continue
			}
			if name == "task_output" { // reads a completed task's output by key, as the views read tasks
				var out []byte
				require.NoError(t, conn.QueryRow(ctx, "SELECT "+schema+".task_output('nobody', now())").Scan(&out))
				require.Nil(t, out)
				continue
			}
			requireNoExecute(t, conn, schema+"_read", schema, name, call)
		}
	})

	// The worker role reads partition_anchor but may not change its rows,
	// which enqueues on Citus insert through.
	asRole(t, schema+"_worker", func(conn *pgxpool.Conn) {
		var n int
		require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM "+schema+".partition_anchor WHERE partition_id = 0").Scan(&n))
		require.Equal(t, 1, n)
		for _, stmt := range []string{
			"INSERT INTO " + schema + ".partition_anchor VALUES (100000)",
			"UPDATE " + schema + ".partition_anchor SET partition_id = partition_id WHERE partition_id = 0",
			"DELETE FROM " + schema + ".partition_anchor WHERE partition_id = 0",
		} {
			_, err := conn.Exec(ctx, stmt)
			requireDenied(t, err, stmt)
		}
	})

	// What the enqueue role wrote is there, as the owner sees it.
	client, err := pgsched.NewClient(pgtest.AdminPool(t), pgsched.ClientConfig{Schema: schema})
	require.NoError(t, err)
	tasks, err := client.ListTasks(ctx, pgsched.TaskFilter{})
	require.NoError(t, err)
	require.Len(t, tasks, 2)
	recurring, err := client.ListRecurring(ctx)
	require.NoError(t, err)
	require.Len(t, recurring, 1, "the deleted schedule is gone")
	require.Equal(t, "nightly", recurring[0].Name)
	require.Equal(t, "0 4 * * *", recurring[0].Spec, "the update took")
	require.JSONEq(t, `{"v": 2}`, string(recurring[0].Payload))
	require.False(t, recurring[0].Paused, "paused, then resumed")
}

// TestRolesWorkerProcesses: two worker processes working as <schema>_worker
// (not the schema's owner) run every task in order, one of them SIGKILLed
// midway, while tasks are enqueued as <schema>_enqueue.
func TestRolesWorkerProcesses(t *testing.T) {
	t.Parallel()
	schema := pgtest.RolesSchema(t, "roles")
	ctx := context.Background()
	admin := pgtest.AdminPool(t)
	_, err := admin.Exec(ctx, "CREATE TABLE "+schema+".execlog (ordering_id text, uk text, node text, attempt int, started timestamptz, ended timestamptz)")
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "SELECT "+schema+".grant_roles(false)") // the test's own table too
	require.NoError(t, err)
	db := &pgtest.DB{URL: pgtest.ServerURL(t), Schema: schema, Pool: admin}

	role := "CHILD_ROLE=" + schema + "_worker"
	c1 := startChild(t, db, "rw-1", 5*time.Millisecond, 8, 2*time.Second, role)
	startChild(t, db, "rw-2", 5*time.Millisecond, 8, 2*time.Second, role)

	const ids, perID = 20, 10
	asRole(t, schema+"_enqueue", func(conn *pgxpool.Conn) {
		for i := range ids {
			now := time.Now() // the whole loop may outlast the grace window on Citus
			for j := range perID {
				_, err := conn.Exec(ctx, "SELECT "+schema+".schedule($1, $2, $3)",
					fmt.Sprintf("id-%02d", i), now.Add(time.Duration(j)*50*time.Millisecond), fmt.Sprintf("u%02d", j))
				require.NoError(t, err)
			}
		}
	})
	eventually(t, 20*time.Second, func() bool {
		var n int
		require.NoError(t, admin.QueryRow(ctx, "SELECT count(*) FROM "+schema+".execlog").Scan(&n))
		return n >= ids*perID/4
	}, "work started")
	require.NoError(t, c1.cmd.Process.Kill())
	eventually(t, 60*time.Second, func() bool {
		var n int
		require.NoError(t, admin.QueryRow(ctx, "SELECT count(*) FROM "+schema+".completions").Scan(&n))
		return n == ids*perID
	}, "every task completed")
	dups := checkLog(t, db, ids, perID)
	t.Logf("runs repeated after the SIGKILL: %d", dups)
}
