package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
)

// TestWebhookRetryAfterSnoozes: a receiver that answers 503 or 429 with
// Retry-After gets the task again after that wait, with the same attempt
// number, although the worker allows one attempt only (a failure would
// kill the task); the ordering_id's next task waits behind it. A 500 with
// Retry-After is a failure like any other.
func TestWebhookRetryAfterSnoozes(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	type delivery struct {
		key     string
		attempt int
		at      time.Time
	}
	var mu sync.Mutex
	var got []delivery
	busy := map[string]string{"first": "503", "busy-429": "429", "broken": "500"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			UniquenessKey string `json:"uniqueness_key"`
			Attempt       int    `json:"attempt"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		seen := 0
		for _, d := range got {
			if d.key == body.UniquenessKey {
				seen++
			}
		}
		got = append(got, delivery{body.UniquenessKey, body.Attempt, time.Now()})
		if code, ok := busy[body.UniquenessKey]; ok && seen == 0 {
			w.Header().Set("Retry-After", "1")
			switch code {
			case "503":
				w.WriteHeader(http.StatusServiceUnavailable)
			case "429":
				w.WriteHeader(http.StatusTooManyRequests)
			default:
				w.WriteHeader(http.StatusInternalServerError)
			}
		}
	}))
	t.Cleanup(srv.Close)

	out := startRun(t, map[string]string{
		"DATABASE_URL":          db.URL,
		"PGSCHED_SCHEMA":        db.Schema,
		"PGSCHED_HTTP_ADDR":     freeAddr(t),
		"PGSCHED_WEBHOOKS":      "*=" + srv.URL + "/hook",
		"PGSCHED_LEASE_TTL":     "1s",
		"PGSCHED_POLL_INTERVAL": "100ms",
		"PGSCHED_MAX_ATTEMPTS":  "1",
	})
	client, err := pgsched.NewClient(db.Pool, pgsched.ClientConfig{Schema: db.Schema})
	require.NoError(t, err)
	ctx := context.Background()
	now := time.Now()
	_, err = client.ScheduleMany(ctx, []pgsched.Task{
		{OrderingID: "o", ScheduledAt: now, UniquenessKey: "first", Kind: "k"},
		{OrderingID: "o", ScheduledAt: now.Add(time.Millisecond), UniquenessKey: "second", Kind: "k"},
		{OrderingID: "p", ScheduledAt: now, UniquenessKey: "busy-429", Kind: "k"},
		{OrderingID: "q", ScheduledAt: now, UniquenessKey: "broken", Kind: "k"},
	})
	require.NoError(t, err)

	count := func(table string) int {
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s.%s", db.Schema, table)).Scan(&n))
		return n
	}
	waitFor(t, 30*time.Second, func() bool { return count("completions") == 3 && count("dead_tasks") == 1 },
		"three tasks complete, the 500 dies; log:\n%s", out.String())

	mu.Lock()
	defer mu.Unlock()
	byKey := map[string][]delivery{}
	var order []string
	for _, d := range got {
		byKey[d.key] = append(byKey[d.key], d)
		if d.key == "first" || d.key == "second" {
			order = append(order, d.key)
		}
	}
	for _, key := range []string{"first", "busy-429"} {
		ds := byKey[key]
		require.Len(t, ds, 2, "%s: sent again after the wait", key)
		require.Equal(t, 1, ds[0].attempt, key)
		require.Equal(t, 1, ds[1].attempt, "%s: the snooze used no attempt", key)
		require.GreaterOrEqual(t, ds[1].at.Sub(ds[0].at), time.Second, "%s: not before Retry-After", key)
	}
	require.Equal(t, []string{"first", "first", "second"}, order, "the next task of the ordering_id waited")
	require.Len(t, byKey["broken"], 1, "a 500 is a failure: the one attempt is used")
}
