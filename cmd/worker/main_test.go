package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/localpg"
	"github.com/pgsched/pgsched/internal/migrator"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/sqlschema"
	"github.com/pgsched/pgsched/internal/webhook"
	"github.com/pgsched/pgsched/pgschedui"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func freeAddr(t *testing.T) string {
	port, err := localpg.FreePort()
	require.NoError(t, err)
	return "127.0.0.1:" + strconv.Itoa(port)
}

// syncBuffer is an io.Writer safe for the worker's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// TestWebhookEndToEnd runs the worker binary's run() against a local HTTP
// receiver: 2xx completes, 500 and timeouts retry, 400 goes dead, and the
// Standard Webhooks signature verifies with the configured secret.
func TestWebhookEndToEnd(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	key := []byte("a 24-byte signing key...")
	secret := webhook.SecretPrefix + base64.StdEncoding.EncodeToString(key)
	var mu sync.Mutex
	calls := map[string]int{}
	badSig := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		kind := r.Header.Get(webhook.KindHeader)
		mu.Lock()
		calls[kind]++
		n := calls[kind]
		if webhook.Verify(key, r.Header, body, time.Now(), webhook.DefaultTolerance) != nil {
			badSig++
		}
		mu.Unlock()
		switch kind {
		case "ok":
			require.Contains(t, string(body), `"payload":{"x":1}`)
			w.WriteHeader(http.StatusNoContent)
		case "flaky":
			if n < 3 {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusOK)
		case "slow":
			if n < 2 {
				time.Sleep(1500 * time.Millisecond) // beyond the 1s webhook timeout below
			}
			w.WriteHeader(http.StatusOK)
		case "bad":
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	t.Cleanup(srv.Close)

	env := map[string]string{
		"DATABASE_URL":            db.URL,
		"PGSCHED_SCHEMA":          db.Schema,
		"PGSCHED_HTTP_ADDR":       freeAddr(t),
		"PGSCHED_WEBHOOKS":        "*=" + srv.URL + "/hook",
		"PGSCHED_WEBHOOK_SECRET":  secret,
		"PGSCHED_LEASE_TTL":       "1s",
		"PGSCHED_POLL_INTERVAL":   "100ms",
		"PGSCHED_WEBHOOK_TIMEOUT": "1s",
	}
	out := startRun(t, env)

	client, err := pgsched.NewClient(db.Pool, pgsched.ClientConfig{Schema: db.Schema})
	require.NoError(t, err)
	now := time.Now()
	_, err = client.ScheduleMany(context.Background(), []pgsched.Task{
		{OrderingID: "a", ScheduledAt: now, Kind: "ok", Payload: []byte(`{"x":1}`)},
		{OrderingID: "b", ScheduledAt: now, Kind: "flaky"},
		{OrderingID: "c", ScheduledAt: now, Kind: "slow"},
		{OrderingID: "d", ScheduledAt: now, Kind: "bad"},
	})
	require.NoError(t, err)

	count := func(q string) int {
		var n int
		require.NoError(t, db.Pool.QueryRow(context.Background(), fmt.Sprintf(q, db.Schema)).Scan(&n))
		return n
	}
	deadline := time.Now().Add(30 * time.Second)
	for count("SELECT count(*) FROM %s.tasks") > 0 {
		require.True(t, time.Now().Before(deadline), "tasks not done; log:\n%s", out.String())
		time.Sleep(20 * time.Millisecond)
	}
	require.Equal(t, 3, count("SELECT count(*) FROM %s.completions"))
	require.Equal(t, 1, count("SELECT count(*) FROM %s.dead_tasks WHERE ordering_id = 'd'"))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, calls["ok"])
	require.Equal(t, 3, calls["flaky"], "500 retried")
	require.Equal(t, 2, calls["slow"], "timeout retried")
	require.Equal(t, 1, calls["bad"], "400 is permanent")
	require.Zero(t, badSig, "every request carried a valid signature")

	resp, err := http.Get("http://" + env["PGSCHED_HTTP_ADDR"] + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(body), `pgsched_tasks_executed_total{kind="flaky",result="retry"} 2`)
	resp, err = http.Get("http://" + env["PGSCHED_HTTP_ADDR"] + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// The console is on by default, and shows the dead task, not the
	// webhook secret or the database URL.
	resp, err = http.Get("http://" + env["PGSCHED_HTTP_ADDR"] + "/ui/dead")
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "bad")
	require.NotContains(t, string(body), "whsec_")
	require.NotContains(t, string(body), "postgres://")
}

func TestParsePrefetch(t *testing.T) {
	t.Parallel()
	o, err := parse(nil, func(k string) string { return map[string]string{"PGSCHED_PREFETCH": "-1"}[k] }, io.Discard)
	require.NoError(t, err)
	require.Equal(t, -1, o.prefetch, "from the environment")
	o, err = parse([]string{"-prefetch", "250"}, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 250, o.prefetch, "from the flag")
	o, err = parse(nil, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	require.Zero(t, o.prefetch, "default: as many as the concurrency")
}

func TestParseRejectsBadInput(t *testing.T) {
	t.Parallel()
	err := run(context.Background(), nil, func(k string) string {
		return map[string]string{"DATABASE_URL": "postgres://x", "PGSCHED_WEBHOOKS": "nourl"}[k]
	}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "PGSCHED_WEBHOOKS")
	require.True(t, strings.Contains(err.Error(), "nourl"))
}

// startRun runs run() with env until the test ends, then requires it to
// stop cleanly.
func startRun(t *testing.T, env map[string]string) *syncBuffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, func(k string) string { return env[k] }, &out, &out) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(20 * time.Second):
			t.Error("worker did not stop")
		}
	})
	return &out
}

// waitFor polls cond until it holds or within passes.
func waitFor(t *testing.T, within time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: "+msg, append([]any{within}, args...)...)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readyz returns /readyz's status and body; status 0 while nothing answers.
func readyz(addr string) (int, string) {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// nowhereURL is a database URL on a port where nothing listens.
func nowhereURL(t *testing.T) string {
	return "postgres://nobody@" + freeAddr(t) + "/none?sslmode=disable"
}

// TestStartsOnceDatabaseComesUp: started while its database is down, the
// worker keeps retrying with /readyz saying why it is not ready, and once
// a PostgreSQL server comes up on that address it migrates, becomes ready
// by itself and runs a task.
func TestStartsOnceDatabaseComesUp(t *testing.T) {
	t.Parallel()
	port, err := localpg.FreePort()
	require.NoError(t, err)
	dbURL := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	dir := t.TempDir()
	// As root, PostgreSQL runs as user postgres, which must reach the data
	// directory through the test's temporary directories.
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	var pg *localpg.Server
	t.Cleanup(func() { // after run's cleanup: the worker stops first
		if pg != nil {
			require.NoError(t, pg.Stop(context.Background()))
		}
	})

	delivered := make(chan string, 10)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		delivered <- r.Header.Get(webhook.KindHeader)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hook.Close)
	addr := freeAddr(t)
	out := startRun(t, map[string]string{
		"DATABASE_URL":          dbURL,
		"PGSCHED_HTTP_ADDR":     addr,
		"PGSCHED_WEBHOOKS":      "*=" + hook.URL + "/hook",
		"PGSCHED_LEASE_TTL":     "1s",
		"PGSCHED_POLL_INTERVAL": "100ms",
	})

	waitFor(t, 15*time.Second, func() bool {
		code, body := readyz(addr)
		return code == http.StatusServiceUnavailable && strings.Contains(body, "migrating failed, retrying")
	}, "/readyz reports the failing migration; log:\n%s", out.String())
	code, body := readyz(addr)
	require.Equal(t, http.StatusServiceUnavailable, code, body)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, err = localpg.Start(ctx, localpg.Options{DataDir: filepath.Join(dir, "data"), Port: port})
	require.NoError(t, err)
	waitFor(t, time.Minute, func() bool { code, _ := readyz(addr); return code == http.StatusOK },
		"ready once the database is up; log:\n%s", out.String())

	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	client, err := pgsched.NewClient(pool, pgsched.ClientConfig{})
	require.NoError(t, err)
	_, err = client.Schedule(ctx, pgsched.Task{OrderingID: "late", ScheduledAt: time.Now(), Kind: "after-outage"})
	require.NoError(t, err)
	select {
	case kind := <-delivered:
		require.Equal(t, "after-outage", kind)
	case <-time.After(30 * time.Second):
		t.Fatalf("task not delivered; log:\n%s", out.String())
	}
}

// TestBadSettingsExitAtOnce: settings no retry can fix end run() with an
// error naming the setting, before the database (here unreachable, where a
// retry loop would hang until the context ends) is touched. Ranges are
// TestSettingsOutOfRange's.
func TestBadSettingsExitAtOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env    map[string]string
		naming string
		is     error
	}{
		{map[string]string{"PGSCHED_SCHEMA": "Bad-Schema"}, "PGSCHED_SCHEMA", sqlschema.ErrInvalidName},
		{map[string]string{"PGSCHED_SCHEMA": "Bad-Schema", "PGSCHED_MIGRATE": "false"}, "PGSCHED_SCHEMA", sqlschema.ErrInvalidName},
		{map[string]string{"PGSCHED_WEBHOOKS": "nourl"}, "PGSCHED_WEBHOOKS", nil},
		{map[string]string{"PGSCHED_WEBHOOKS": "a=ftp://127.0.0.1/hook"}, "PGSCHED_WEBHOOKS", nil},
		{map[string]string{"PGSCHED_WEBHOOKS": "a=http://127.0.0.1/1,a=http://127.0.0.1/2"}, "PGSCHED_WEBHOOKS", nil},
		{map[string]string{"PGSCHED_WEBHOOKS": "=http://127.0.0.1/1"}, "PGSCHED_WEBHOOKS", nil},
		{map[string]string{"PGSCHED_WEBHOOKS": "*=http://127.0.0.1/1", "PGSCHED_WEBHOOK_SECRET": "s3cret-plain"}, "PGSCHED_WEBHOOK_SECRET", nil},
		{map[string]string{"PGSCHED_WEBHOOKS": "*=http://127.0.0.1/1", "PGSCHED_WEBHOOK_SECRET": "whsec_c2hvcnQ="}, "PGSCHED_WEBHOOK_SECRET", nil},
		{map[string]string{"PGSCHED_CONSOLE_TOKEN": "short-TOKEN"}, "PGSCHED_CONSOLE_TOKEN", pgschedui.ErrShortToken},
	} {
		env := map[string]string{"DATABASE_URL": nowhereURL(t), "PGSCHED_HTTP_ADDR": freeAddr(t)}
		maps.Copy(env, tc.env)
		// A retry loop would return nil when this ends.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := run(ctx, nil, func(k string) string { return env[k] }, io.Discard, io.Discard)
		cancel()
		require.Error(t, err, "%v", tc.env)
		require.ErrorContains(t, err, tc.naming, "%v", tc.env)
		for _, v := range []string{"PGSCHED_WEBHOOK_SECRET", "PGSCHED_CONSOLE_TOKEN"} {
			if secret := tc.env[v]; secret != "" {
				require.NotContains(t, err.Error(), secret, "an error never repeats a secret")
			}
		}
		if tc.is != nil {
			require.ErrorIs(t, err, tc.is, "%v", tc.env)
		}
	}
}

// TestStartsOnceSchemaIsMigrated: with PGSCHED_MIGRATE=false and the schema
// not migrated yet, the worker retries its start, /readyz saying why, and
// becomes ready by itself once someone else migrates the schema.
func TestStartsOnceSchemaIsMigrated(t *testing.T) {
	t.Parallel()
	url := pgtest.ServerURL(t)
	schema := pgtest.UniqueName(t, "later")
	t.Cleanup(func() {
		_, _ = pgtest.AdminPool(t).Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	})
	addr := freeAddr(t)
	out := startRun(t, map[string]string{
		"DATABASE_URL":      url,
		"PGSCHED_SCHEMA":    schema,
		"PGSCHED_MIGRATE":   "false",
		"PGSCHED_HTTP_ADDR": addr,
		"PGSCHED_LEASE_TTL": "1s",
	})
	waitFor(t, 15*time.Second, func() bool {
		code, body := readyz(addr)
		return code == http.StatusServiceUnavailable && strings.Contains(body, "schema not ready")
	}, "/readyz reports the missing schema; log:\n%s", out.String())

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, migrator.Up(ctx, url, migrator.Options{Schema: schema, Partitions: 8, TablePartitions: 4}))
	waitFor(t, 30*time.Second, func() bool { code, _ := readyz(addr); return code == http.StatusOK },
		"ready once the schema is migrated; log:\n%s", out.String())
	require.NotContains(t, out.String(), pgsched.ErrAlreadyStarted.Error())
}

// TestMigratesWithPoolSettings: a DATABASE_URL carrying pgxpool's own
// settings (pool_max_conns), which the handlers' pool takes, migrates too:
// migrating from the same parsed configuration, PostgreSQL never sees them
// as unknown session parameters, refusing every connection for ever.
func TestMigratesWithPoolSettings(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.ServerURL(t))
	require.NoError(t, err)
	q := u.Query()
	q.Set("pool_max_conns", "12")
	u.RawQuery = q.Encode()
	schema := pgtest.UniqueName(t, "poolurl")
	t.Cleanup(func() {
		_, _ = pgtest.AdminPool(t).Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	})
	addr := freeAddr(t)
	out := startRun(t, map[string]string{
		"DATABASE_URL":      u.String(),
		"PGSCHED_SCHEMA":    schema,
		"PGSCHED_HTTP_ADDR": addr,
		"PGSCHED_LEASE_TTL": "1s",
	})
	waitFor(t, 30*time.Second, func() bool { code, _ := readyz(addr); return code == http.StatusOK },
		"ready, migrated; log:\n%s", out)
}
