package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/webhook"
)

// TestWebhookAnswerKeptAsOutput: with PGSCHED_WEBHOOK_OUTPUT, a receiver's
// JSON answer is the task's output, read by key; an answer that is not
// JSON is not kept, and its task completes all the same.
func TestWebhookAnswerKeptAsOutput(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch r.Header.Get(webhook.KindHeader) {
		case "json":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"invoice": "INV-7", "total": 12.5}`)
		case "text":
			_, _ = io.WriteString(w, "thanks!")
		}
	}))
	t.Cleanup(srv.Close)
	out := startRun(t, map[string]string{
		"DATABASE_URL":           db.URL,
		"PGSCHED_SCHEMA":         db.Schema,
		"PGSCHED_HTTP_ADDR":      freeAddr(t),
		"PGSCHED_WEBHOOKS":       "*=" + srv.URL + "/hook",
		"PGSCHED_WEBHOOK_OUTPUT": "true",
		"PGSCHED_LEASE_TTL":      "1s",
		"PGSCHED_POLL_INTERVAL":  "100ms",
	})
	client, err := pgsched.NewClient(db.Pool, pgsched.ClientConfig{Schema: db.Schema})
	require.NoError(t, err)
	ctx := context.Background()
	at := time.Now().Truncate(time.Microsecond)
	_, err = client.ScheduleMany(ctx, []pgsched.Task{
		{OrderingID: "a", ScheduledAt: at, Kind: "json"},
		{OrderingID: "b", ScheduledAt: at, Kind: "text"},
		{OrderingID: "c", ScheduledAt: at, Kind: "empty"},
	})
	require.NoError(t, err)
	waitFor(t, 30*time.Second, func() bool {
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s.completions", db.Schema)).Scan(&n))
		return n == 3
	}, "all three complete; log:\n%s", out.String())
	got, err := client.TaskOutput(ctx, pgsched.Key{OrderingID: "a", ScheduledAt: at})
	require.NoError(t, err)
	require.JSONEq(t, `{"invoice": "INV-7", "total": 12.5}`, string(got))
	for _, o := range []string{"b", "c"} {
		got, err := client.TaskOutput(ctx, pgsched.Key{OrderingID: o, ScheduledAt: at})
		require.NoError(t, err)
		require.Nil(t, got, o)
	}
	require.Contains(t, out.String(), "webhook answer not kept as the task's output")
}
