package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/webhook"
)

// TestWebhookRedirectRetriesUntilFixed: a receiver that answers 301, 302,
// 307 or 308 keeps the task pending with an error naming the status and
// the redirect target's scheme and host (nothing of its path or query), and
// once the receiver is fixed the same task completes instead of being lost
// on its first attempt.
func TestWebhookRedirectRetriesUntilFixed(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	var fixed atomic.Bool
	var calls atomic.Int32
	codes := map[string]int{"r301": 301, "r302": 302, "r307": 307, "r308": 308}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if fixed.Load() {
			return
		}
		w.Header().Set("Location", "https://new-home.example/hook/PATH-SECRET?token=QUERY-SECRET")
		w.WriteHeader(codes[r.Header.Get(webhook.KindHeader)])
	}))
	t.Cleanup(srv.Close)

	out := startRun(t, map[string]string{
		"DATABASE_URL":          db.URL,
		"PGSCHED_SCHEMA":        db.Schema,
		"PGSCHED_HTTP_ADDR":     freeAddr(t),
		"PGSCHED_WEBHOOKS":      "*=" + srv.URL + "/hook",
		"PGSCHED_LEASE_TTL":     "1s",
		"PGSCHED_POLL_INTERVAL": "100ms",
	})
	client, err := pgsched.NewClient(db.Pool, pgsched.ClientConfig{Schema: db.Schema})
	require.NoError(t, err)
	ctx := context.Background()
	var tasks []pgsched.Task
	for kind := range codes {
		tasks = append(tasks, pgsched.Task{OrderingID: kind, ScheduledAt: time.Now(), Kind: kind})
	}
	_, err = client.ScheduleMany(ctx, tasks)
	require.NoError(t, err)

	count := func(table string) int {
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s.%s", db.Schema, table)).Scan(&n))
		return n
	}
	lastErrors := func() map[string]string {
		require.Zero(t, count("dead_tasks"), "a redirect must not kill the task; log:\n%s", out.String())
		rows, err := db.Pool.Query(ctx, fmt.Sprintf(
			"SELECT kind, last_error FROM %s.tasks WHERE last_error IS NOT NULL", db.Schema))
		require.NoError(t, err)
		got := map[string]string{}
		for rows.Next() {
			var kind, msg string
			require.NoError(t, rows.Scan(&kind, &msg))
			got[kind] = msg
		}
		require.NoError(t, rows.Err())
		return got
	}
	waitFor(t, 30*time.Second, func() bool { return len(lastErrors()) == len(codes) },
		"every task failed once and is still pending; log:\n%s", out.String())
	for kind, msg := range lastErrors() {
		code := codes[kind]
		require.Contains(t, msg, fmt.Sprintf("status %d %s (retryable): redirect to https://new-home.example not followed",
			code, http.StatusText(code)), kind)
		require.NotContains(t, msg, "SECRET", kind)
	}

	fixed.Store(true)
	waitFor(t, 30*time.Second, func() bool { return count("tasks") == 0 },
		"the tasks complete once the receiver answers 200; log:\n%s", out.String())
	require.Equal(t, len(codes), count("completions"))
	require.Zero(t, count("dead_tasks"))
	require.Greater(t, int(calls.Load()), len(codes))
	require.False(t, strings.Contains(out.String(), "SECRET"), "nor does the log show the Location's secrets")
}
