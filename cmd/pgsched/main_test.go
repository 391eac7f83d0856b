package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// result is one run of the command: what it printed and its exit status.
type result struct {
	stdout, stderr string
	code           int
}

// pgschedAt runs the command in-process as main does, with DATABASE_URL
// dbURL and PGSCHED_SCHEMA schema, and returns what main would print and
// exit with.
func pgschedAt(t *testing.T, dbURL, schema string, args ...string) result {
	t.Helper()
	env := map[string]string{"DATABASE_URL": dbURL, "PGSCHED_SCHEMA": schema}
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := exitCode(run(ctx, args, func(k string) string { return env[k] }, &out, &errOut), &errOut)
	return result{stdout: out.String(), stderr: errOut.String(), code: code}
}

// bundle is a test's migrated schema with a client on it.
type bundle struct {
	db     *pgtest.DB
	client *pgsched.Client
}

func setup(t *testing.T) bundle {
	t.Helper()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	client, err := pgsched.NewClient(db.Pool, pgsched.ClientConfig{Schema: db.Schema})
	require.NoError(t, err)
	return bundle{db: db, client: client}
}

// cli runs the command as the schema's owner.
func (b bundle) cli(t *testing.T, args ...string) result {
	t.Helper()
	return pgschedAt(t, b.db.URL, b.db.Schema, args...)
}

// ok runs the command, requires exit 0 and nothing on stderr, and
// returns stdout.
func (b bundle) ok(t *testing.T, args ...string) string {
	t.Helper()
	r := b.cli(t, args...)
	require.Equal(t, exitOK, r.code, "pgsched %s: %s", strings.Join(args, " "), r.stderr)
	require.Empty(t, r.stderr)
	return r.stdout
}

// okJSON runs the command with -json and decodes its output into v.
func (b bundle) okJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out := b.ok(t, append(args, "-json")...)
	require.NoError(t, json.Unmarshal([]byte(out), v), out)
}

// countKinds takes the leader's count now, as the leader does every few
// seconds.
func (b bundle) countKinds(t *testing.T) {
	t.Helper()
	_, err := b.db.Pool.Exec(context.Background(), "SELECT "+b.db.Schema+".count_kinds()")
	require.NoError(t, err)
}

// roleURL is url with the session acting as role (SET ROLE at connect,
// which the server's superuser may), as a login role granted it would.
func roleURL(t *testing.T, base, role string) string {
	t.Helper()
	u, err := url.Parse(base)
	require.NoError(t, err)
	// %20, not +: pgx does not read + as a space.
	opt := "options=" + strings.ReplaceAll(url.QueryEscape("-c role="+role), "+", "%20")
	if u.RawQuery == "" {
		u.RawQuery = opt
	} else {
		u.RawQuery += "&" + opt
	}
	return u.String()
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, cond func() bool, msg string) {
	t.Helper()
	within = pgtest.Patience(within)
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUsageExits: help, -h and version exit 0 on stdout; a command line
// pgsched cannot run exits 2 saying why, before it touches the database;
// a connection string that does not parse is not echoed (it may hold a
// password).
func TestUsageExits(t *testing.T) {
	t.Parallel()
	const db = "postgres://nobody@127.0.0.1:1/none"
	r := pgschedAt(t, db, "", "help")
	require.Equal(t, exitOK, r.code)
	for _, cmd := range commands {
		require.Contains(t, r.stdout, cmd.path, "help lists every command")
	}
	require.Contains(t, r.stdout, "Exit status")
	require.Empty(t, r.stderr)

	r = pgschedAt(t, db, "", "-h")
	require.Equal(t, exitOK, r.code)
	require.Contains(t, r.stdout, "-database-url")

	r = pgschedAt(t, db, "", "tasks", "list", "-h")
	require.Equal(t, exitOK, r.code)
	require.Contains(t, r.stdout, "-state")
	require.Contains(t, r.stdout, "-json", "the global flags work after the command too")

	r = pgschedAt(t, db, "", "dead", "retry", "-h")
	require.Equal(t, exitOK, r.code)
	require.Contains(t, r.stdout, "_worker", "an acting command says who may run it")

	r = pgschedAt(t, db, "", "version")
	require.Equal(t, exitOK, r.code)
	require.Regexp(t, `^pgsched \S+`, r.stdout)
	var v map[string]string
	r = pgschedAt(t, db, "", "version", "-json")
	require.Equal(t, exitOK, r.code)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v))
	require.NotEmpty(t, v["version"])

	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no command given"},
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"tasks"}, "tasks wants one of: list, show"},
		{[]string{"tasks", "bogus"}, `unknown command "tasks bogus": tasks wants one of: list, show`},
		{[]string{"-bogus", "status"}, "flag provided but not defined: -bogus"},
		{[]string{"tasks", "list", "-bogus"}, "tasks list: flag provided but not defined: -bogus"},
		{[]string{"tasks", "list", "-state", "done"}, `-state must be pending or running, got "done"`},
		{[]string{"tasks", "list", "-limit", "0"}, "-limit must be between 1 and 10000, got 0"},
		{[]string{"tasks", "list", "extra"}, "tasks list takes no arguments"},
		{[]string{"tasks", "show"}, "tasks show wants one task id or uniqueness key, got 0 arguments"},
		{[]string{"dead", "show", "x"}, `a dead task's id is a positive whole number (dead list shows them), got "x"`},
		{[]string{"dead", "retry"}, "dead retry: name dead tasks by id, or select them with -kind"},
		{[]string{"dead", "delete", "5", "-kind", "k"}, "dead delete: give ids or a filter"},
		{[]string{"dead", "delete", "-all", "-kind", "k"}, "-all selects every dead task; it takes no other filter"},
		{[]string{"dead", "list", "-died-after", "yesterday"}, `-died-after must be an RFC 3339 time (2006-01-02T15:04:05Z) or a duration (1h), got "yesterday"`},
		{[]string{"kinds", "pause"}, "kinds pause wants one kind, got 0 arguments"},
		{[]string{"status", "-timeout", "0s"}, "-timeout must be positive"},
		{[]string{"status", "-schema", "Bad-Name"}, "-schema (PGSCHED_SCHEMA)"},
	} {
		r := pgschedAt(t, db, "", tc.args...)
		require.Equal(t, exitUsage, r.code, "%q: %s", tc.args, r.stderr)
		require.Contains(t, r.stderr, tc.want, "%q", tc.args)
		require.True(t, strings.HasPrefix(r.stderr, "pgsched: ") || tc.args == nil, "%q: %s", tc.args, r.stderr)
	}

	r = pgschedAt(t, "", "", "status")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "no database: set DATABASE_URL or -database-url")

	r = pgschedAt(t, "postgres://user:hunter2@127.0.0.1:notaport/db", "", "status")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "DATABASE_URL (-database-url) does not parse")
	require.NotContains(t, r.stderr, "hunter2")
}

// TestUnreachable: a database that does not answer exits 1, saying so.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	r := pgschedAt(t, "postgres://nobody:hunter2@127.0.0.1:1/none?connect_timeout=5", "", "status")
	require.Equal(t, exitFailed, r.code)
	require.Contains(t, r.stderr, "pgsched: status: cannot reach the database")
	require.NotContains(t, r.stderr, "hunter2")
	require.Empty(t, r.stdout)
}

// TestSchemaMissing: a schema that is not there exits 1 naming it.
func TestSchemaMissing(t *testing.T) {
	t.Parallel()
	r := pgschedAt(t, pgtest.ServerURL(t), "no_such_schema", "kinds", "list")
	require.Equal(t, exitFailed, r.code)
	require.Contains(t, r.stderr, `schema "no_such_schema" is not there or not migrated`)
}
