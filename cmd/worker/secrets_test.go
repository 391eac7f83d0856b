package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/webhook"
)

// TestRetryingHidesWebhookPassword: the start-up line shows webhook routes
// as scheme and host only, without their users, passwords or paths, and
// /readyz says why the worker is not ready while it retries.
func TestRetryingHidesWebhookPassword(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	out := startRun(t, map[string]string{
		"DATABASE_URL":      nowhereURL(t),
		"PGSCHED_HTTP_ADDR": addr,
		"PGSCHED_WEBHOOKS":  "*=http://user:secret@127.0.0.1:1/hook, mail=https://u:hunter2@example.com/m",
	})
	waitFor(t, 10*time.Second, func() bool { return strings.Count(out.String(), "failed; retrying") >= 2 },
		"retrying the unreachable database; log:\n%s", out.String())
	code, body := readyz(addr)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "migrating failed, retrying")
	require.Contains(t, out.String(), "*=http://127.0.0.1:1,mail=https://example.com")
	for _, secret := range []string{"user:", "secret", "hunter2", "/hook"} {
		require.NotContains(t, out.String(), secret)
		require.NotContains(t, body, secret)
	}
}

// TestConsoleShowsNoSecrets: a worker whose webhook URLs carry credentials
// (user info, a secret path, a token in the query), whose database URL
// holds a password and which has a signing secret and a console token
// runs tasks that fail against those webhooks; no console page, detail
// page, metric or health answer shows any of them, nor does the log show
// a password.
func TestConsoleShowsNoSecrets(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	ctx := context.Background()
	dbURL := passwordURL(t, db, "db-PASSWORD-1")
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadRequest) }))
	t.Cleanup(refusing.Close)
	creds := func(base string) string {
		return strings.Replace(base, "http://", "http://hook-user:hook-PASSWORD@", 1) + "/services/PATH-SECRET?token=QUERY-SECRET"
	}
	addr := freeAddr(t)
	secret := webhook.SecretPrefix + base64.StdEncoding.EncodeToString([]byte("signing-SECRET-key-24bytes"))
	env := map[string]string{
		"DATABASE_URL":           dbURL,
		"PGSCHED_SCHEMA":         db.Schema,
		"PGSCHED_HTTP_ADDR":      addr,
		"PGSCHED_WEBHOOKS":       "refused=" + creds(refusing.URL) + ", down=" + creds("http://"+freeAddr(t)),
		"PGSCHED_WEBHOOK_SECRET": secret,
		"PGSCHED_CONSOLE_TOKEN":  "console-TOKEN-1-of-24-bytes",
		"PGSCHED_MAX_ATTEMPTS":   "1",
		"PGSCHED_LEASE_TTL":      "1s",
		"PGSCHED_POLL_INTERVAL":  "100ms",
	}
	out := startRun(t, env)
	waitFor(t, 20*time.Second, func() bool { code, _ := readyz(addr); return code == http.StatusOK }, "ready; log:\n%s", out)
	client, err := pgsched.NewClient(db.Pool, pgsched.ClientConfig{Schema: db.Schema})
	require.NoError(t, err)
	for _, kind := range []string{"refused", "down"} {
		_, err := client.Schedule(ctx, pgsched.Task{OrderingID: "o-" + kind, ScheduledAt: time.Now(), Kind: kind})
		require.NoError(t, err)
	}
	var ids []int64
	waitFor(t, 20*time.Second, func() bool {
		rows, err := db.Pool.Query(ctx, "SELECT id FROM "+db.Schema+".dead_tasks")
		require.NoError(t, err)
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		require.NoError(t, err)
		return len(ids) == 2
	}, "both tasks dead; log:\n%s", out)

	pages := []string{"/ui/", "/ui/kinds", "/ui/cluster", "/ui/tasks", "/ui/dead", "/ui/recurring", "/metrics", "/healthz", "/readyz",
		"/ui/static/style.css"}
	for _, id := range ids {
		pages = append(pages, fmt.Sprintf("/ui/dead/%d", id))
	}
	for _, kind := range []string{"refused", "down"} {
		var at time.Time
		require.NoError(t, db.Pool.QueryRow(ctx, "SELECT scheduled_at FROM "+db.Schema+".dead_tasks WHERE kind = $1", kind).Scan(&at))
		pages = append(pages, "/ui/tasks/key?"+url.Values{"ordering_id": {"o-" + kind}, "scheduled_at": {at.UTC().Format(time.RFC3339Nano)}}.Encode())
	}
	secrets := []string{"hook-PASSWORD", "hook-user", "PATH-SECRET", "QUERY-SECRET", "db-PASSWORD-1", "console-TOKEN-1-of-24-bytes", secret,
		strings.TrimPrefix(secret, webhook.SecretPrefix)}
	for _, page := range pages {
		resp, err := http.Get("http://" + addr + page)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, page)
		for _, s := range secrets {
			require.NotContains(t, string(body), s, "%s shows a secret", page)
		}
		if strings.HasPrefix(page, "/ui/dead/") {
			require.Contains(t, string(body), "webhook: kind", "%s shows the error, without the secrets", page)
		}
	}
	for _, s := range secrets {
		require.NotContains(t, out.String(), s, "the log shows a secret")
	}
}

// passwordURL is db's URL for a new superuser role of its own whose
// password is password.
func passwordURL(t *testing.T, db *pgtest.DB, password string) string {
	t.Helper()
	role := strings.ReplaceAll(db.Schema, "-", "_") + "_pw"
	_, err := pgtest.AdminPool(t).Exec(context.Background(), fmt.Sprintf(`CREATE ROLE %s LOGIN SUPERUSER PASSWORD '%s'`, role, password))
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = pgtest.AdminPool(t).Exec(context.Background(), "DROP ROLE IF EXISTS "+role) })
	u, err := url.Parse(db.URL)
	require.NoError(t, err)
	u.User = url.UserPassword(role, password)
	return u.String()
}

// TestOutputShowsNoSecrets: with a secret in every secret setting (the
// database password, two signing secrets, the console token, webhook URLs
// with user and password, a secret path and a ?token= query), nothing the
// worker writes to stdout or stderr, nor an error it returns, shows any of
// them: not -h, not a bad route, not a bad database URL, not a start and a
// stop (the console's pages and a failing delivery's log lines are
// TestConsoleShowsNoSecrets').
func TestOutputShowsNoSecrets(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(hook.Close)
	withCreds := func(base string) string {
		return strings.Replace(base, "://", "://hook-USER:hook-PASSWORD@", 1) + "/PATH-SECRET/x?token=QUERY-SECRET"
	}
	secret1 := webhook.SecretPrefix + base64.StdEncoding.EncodeToString([]byte("first-SIGNING-key-24byte"))
	secret2 := webhook.SecretPrefix + base64.StdEncoding.EncodeToString([]byte("second-SIGNING-key-24byt"))
	secrets := []string{"db-PASSWORD-2", "hook-USER", "hook-PASSWORD", "PATH-SECRET", "QUERY-SECRET", "console-TOKEN-2-of-24-bytes",
		secret1, secret2, strings.TrimPrefix(secret1, webhook.SecretPrefix), strings.TrimPrefix(secret2, webhook.SecretPrefix)}
	addr := freeAddr(t)
	env := map[string]string{
		"DATABASE_URL":           passwordURL(t, db, "db-PASSWORD-2"),
		"PGSCHED_SCHEMA":         db.Schema,
		"PGSCHED_HTTP_ADDR":      addr,
		"PGSCHED_WEBHOOKS":       "a=" + withCreds(hook.URL) + ", *=" + withCreds("https://example.com:8443"),
		"PGSCHED_WEBHOOK_SECRET": secret1 + "," + secret2,
		"PGSCHED_CONSOLE_TOKEN":  "console-TOKEN-2-of-24-bytes",
		"PGSCHED_LEASE_TTL":      "1s",
	}
	showsNone := func(what, output string) {
		t.Helper()
		for _, s := range secrets {
			require.NotContains(t, output, s, "%s shows a secret", what)
		}
	}
	runWith := func(change map[string]string, args ...string) (string, error) {
		e := maps.Clone(env)
		maps.Copy(e, change)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var out syncBuffer
		err := run(ctx, args, func(k string) string { return e[k] }, &out, &out)
		return out.String(), err
	}

	out, err := runWith(nil, "-h")
	require.ErrorIs(t, err, errDone)
	showsNone("-h", out)
	for _, f := range []string{"-database-url", "-webhooks", "-webhook-secret", "-console-token"} {
		require.Regexp(t, `(?m)^  `+f+` .*
.*\(default \(set\)\)$`, out, "-h says %s is set", f)
	}
	out, err = runWith(map[string]string{"DATABASE_URL": "", "PGSCHED_WEBHOOKS": "", "PGSCHED_WEBHOOK_SECRET": "", "PGSCHED_CONSOLE_TOKEN": ""}, "-h")
	require.ErrorIs(t, err, errDone)
	require.NotContains(t, out, "(set)", "-h says nothing of unset secrets")

	for _, routes := range []string{
		"a=" + withCreds("ftp://127.0.0.1:1"),                                            // not http
		"a=" + withCreds("http://127.0.0.1:1") + ",a=" + withCreds("http://127.0.0.1:2"), // duplicate kind
		withCreds("http://127.0.0.1:1"),                                                  // no kind, '=' in the query
		strings.TrimSuffix(withCreds("http://127.0.0.1:1"), "?token=QUERY-SECRET"),       // no '='
		"a=" + withCreds("http://127.0.0.1:x"),                                           // unparsable
		"a=" + strings.TrimPrefix(withCreds("http://127.0.0.1:1"), "http://"),            // no scheme
	} {
		out, err := runWith(map[string]string{"PGSCHED_WEBHOOKS": routes})
		require.ErrorContains(t, err, "PGSCHED_WEBHOOKS (-webhooks)", routes)
		showsNone("a bad route's error", err.Error())
		showsNone("a bad route's output", out)
	}
	for _, bad := range []string{
		"postgres://someone:db-PASSWORD-2@127.0.0.1:x/db?sslpassword=db-PASSWORD-2", // bad port
		"postgres://someone:db-PASSWORD-2@127.0.0.1/db?connect_timeout=db-PASSWORD-2",
		"host=127.0.0.1 password=db-PASSWORD-2 port=x",
	} {
		out, err := runWith(map[string]string{"DATABASE_URL": bad})
		require.ErrorContains(t, err, "DATABASE_URL (-database-url) does not parse")
		showsNone("a bad database URL's error", err.Error())
		showsNone("a bad database URL's output", out)
	}

	// A start and a clean stop.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var started syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, func(k string) string { return env[k] }, &started, &started) }()
	waitFor(t, 20*time.Second, func() bool { code, _ := readyz(addr); return code == http.StatusOK }, "ready; log:\n%s", &started)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("worker did not stop")
	}
	require.Contains(t, started.String(), "PGSCHED_WEBHOOKS=*=https://example.com:8443,a="+hook.URL+"\n",
		"the start-up line shows each route's scheme and host")
	require.Contains(t, started.String(), "worker stopped")
	showsNone("a start and stop", started.String())
}
