package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/webhook"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
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
// HMAC signature verifies with the configured secret.
func TestWebhookEndToEnd(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	secret := "s3cret"
	var mu sync.Mutex
	calls := map[string]int{}
	badSig := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		kind := r.Header.Get(webhook.KindHeader)
		mu.Lock()
		calls[kind]++
		n := calls[kind]
		if !webhook.Verify([]byte(secret), body, r.Header.Get(webhook.SignatureHeader)) {
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

	client, err := pgsched.NewClient(db.Pool, pgsched.Config{Schema: db.Schema})
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
	for name, env := range map[string]map[string]string{
		"bad ttl":         {"PGSCHED_LEASE_TTL": "soon"},
		"bad concurrency": {"PGSCHED_CONCURRENCY": "many"},
		"zero conc":       {"PGSCHED_CONCURRENCY": "0"},
		"bad prefetch":    {"PGSCHED_PREFETCH": "lots"},
	} {
		_, err := parse(nil, func(k string) string { return env[k] }, io.Discard)
		require.Error(t, err, name)
	}
	err := run(context.Background(), nil, func(k string) string {
		return map[string]string{"DATABASE_URL": "postgres://x", "PGSCHED_WEBHOOKS": "nourl"}[k]
	}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "PGSCHED_WEBHOOKS")
	require.True(t, strings.Contains(err.Error(), "nourl"))
}
