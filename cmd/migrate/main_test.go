package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/schemaversion"
	"github.com/pgsched/pgsched/pgschedmigrate"
)

// The test binary doubles as the migrate command: with this variable set it
// runs main's run() on its arguments, in a process of its own.
const childEnv = "PGSCHED_TEST_RUN_MIGRATE"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		args := os.Args[1:]
		for i, a := range args {
			if a == "--" {
				args = args[i+1:]
				break
			}
		}
		if err := run(context.Background(), args, os.Getenv, os.Stdout, os.Stderr); err != nil {
			os.Stderr.WriteString("migrate: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	pgtest.Main(m)
}

func migrateProcess(t *testing.T, url, schema string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), childEnv+"=1", "DATABASE_URL="+url, "PGSCHED_SCHEMA="+schema, "PGSCHED_PARTITIONS=16")
	return cmd
}

func TestConcurrentUpAppliesOnce(t *testing.T) {
	t.Parallel()
	url := pgtest.ServerURL(t)
	schema := pgtest.UniqueName(t, "mig")
	t.Cleanup(func() {
		_, _ = pgtest.AdminPool(t).Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	})

	var wg sync.WaitGroup
	outs := make([]bytes.Buffer, 2)
	errs := make([]error, 2)
	for i := range 2 {
		cmd := migrateProcess(t, url, schema, "up")
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		require.NoError(t, cmd.Start())
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = cmd.Wait() }()
	}
	wg.Wait()
	for i := range 2 {
		require.NoError(t, errs[i], "process %d: %s", i, outs[i].String())
	}

	ctx := context.Background()
	var applied, versions int
	require.NoError(t, pgtest.AdminPool(t).QueryRow(ctx,
		"SELECT count(*), count(DISTINCT version_id) FROM "+schema+".goose_db_version WHERE version_id > 0").Scan(&applied, &versions))
	require.Equal(t, versions, applied, "each migration applied once")
	require.Positive(t, versions)
	var parts int
	require.NoError(t, pgtest.AdminPool(t).QueryRow(ctx, "SELECT partition_count FROM "+schema+".settings").Scan(&parts))
	require.Equal(t, 16, parts)
	logs := outs[0].String() + outs[1].String()
	require.Equal(t, versions, strings.Count(logs, "migration applied"), "one process applied, the other found nothing to do:\n%s", logs)
}

func TestDownUpRoundTrip(t *testing.T) {
	t.Parallel()
	url := pgtest.ServerURL(t)
	schema := pgtest.UniqueName(t, "mig")
	t.Cleanup(func() {
		_, _ = pgtest.AdminPool(t).Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := func(k string) string {
		return map[string]string{"DATABASE_URL": url, "PGSCHED_SCHEMA": schema}[k]
	}
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"up"}, env, &out, &out))
	require.NoError(t, run(ctx, []string{"reset"}, env, &out, &out))
	var tables int
	require.NoError(t, pgtest.AdminPool(t).QueryRow(ctx,
		"SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename <> 'goose_db_version'", schema).Scan(&tables))
	require.Zero(t, tables, "down removes everything but goose's own table")
	require.NoError(t, run(ctx, []string{"up"}, env, &out, &out))
	out.Reset()
	require.NoError(t, run(ctx, []string{"status"}, env, &out, &out))
	require.Contains(t, out.String(), "applied")
	require.NotContains(t, out.String(), "pending")
	_, err := pgtest.AdminPool(t).Exec(ctx, "SELECT "+schema+".schedule('x', now())")
	require.NoError(t, err, "the schema works after a round trip")
}

func TestBadArguments(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	env := func(string) string { return "" }
	require.ErrorContains(t, run(context.Background(), []string{"up"}, env, &out, &out), "DATABASE_URL")
	require.ErrorContains(t, run(context.Background(), []string{"sideways"}, func(k string) string {
		if k == "DATABASE_URL" {
			return pgtest.ServerURL(t)
		}
		return ""
	}, &out, &out), "unknown command")
	require.ErrorContains(t, run(context.Background(), []string{"-schema", "Bad-Name", "-database-url", "postgres://x", "up"}, env, &out, &out), "invalid schema name")
}

// TestNewerSchema: status lists a version newer than this build and says
// so, exiting with an error; up refuses and leaves the schema as it is.
func TestNewerSchema(t *testing.T) {
	t.Parallel()
	url := pgtest.ServerURL(t)
	schema := pgtest.UniqueName(t, "mig")
	t.Cleanup(func() {
		_, _ = pgtest.AdminPool(t).Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := func(k string) string {
		return map[string]string{"DATABASE_URL": url, "PGSCHED_SCHEMA": schema}[k]
	}
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"up"}, env, &out, &out))
	newer := schemaversion.Latest() + 1
	_, err := pgtest.AdminPool(t).Exec(ctx, fmt.Sprintf("INSERT INTO %s.goose_db_version (version_id, is_applied) VALUES (%d, true)", schema, newer))
	require.NoError(t, err)
	want := fmt.Sprintf("schema version %d is newer than this build (%d); upgrade pgsched", newer, schemaversion.Latest())

	out.Reset()
	err = run(ctx, []string{"status"}, env, &out, &out)
	require.ErrorIs(t, err, pgschedmigrate.ErrSchemaNewer)
	require.EqualError(t, err, want)
	require.Regexp(t, fmt.Sprintf(`(?m)^%05d  \(newer than this build\)\s+applied `, newer), out.String())
	require.NotContains(t, out.String(), "pending")

	out.Reset()
	err = run(ctx, []string{"up"}, env, &out, &out)
	require.EqualError(t, err, want)
	require.NotContains(t, out.String(), "functions and views applied")
}
