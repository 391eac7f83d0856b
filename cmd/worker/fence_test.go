package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
)

// TestWebhookNotSentOnceTermIsOver: the worker binary's webhook handler
// checks the node's lease right before it sends (SPEC: the webhook
// executor never sends once its lease deadline has passed, even when it
// wakes from a freeze before its context is cancelled). The handler's
// context, detached from its cancellation (it keeps its values, as a
// context not yet cancelled would), sends while the term lasts and sends
// nothing once the term is over.
func TestWebhookNotSentOnceTermIsOver(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	o, err := parse(nil, func(k string) string { return map[string]string{"PGSCHED_WEBHOOKS": "*=" + srv.URL}[k] }, io.Discard)
	require.NoError(t, err)
	_, exec, err := webhooks(o)
	require.NoError(t, err)
	cfg := workerConfig(o, exec, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	cfg.Schema, cfg.NodeID, cfg.LeaseTTL, cfg.PollInterval = db.Schema, "hook-node", pgtest.Patience(time.Second), 100*time.Millisecond
	send := cfg.Handlers["*"]
	type run struct {
		ctx context.Context
		job *pgsched.Job
		err error
	}
	ran := make(chan run, 1)
	cfg.Handlers["*"] = pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error {
		err := send.Work(context.WithoutCancel(ctx), job)
		ran <- run{ctx: ctx, job: job, err: err}
		return err
	})
	w, err := pgsched.NewWorker(db.Pool, cfg)
	require.NoError(t, err)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	client, err := pgsched.NewClient(db.Pool, pgsched.ClientConfig{Schema: db.Schema})
	require.NoError(t, err)
	_, err = client.Schedule(context.Background(), pgsched.Task{OrderingID: "hook", ScheduledAt: time.Now()})
	require.NoError(t, err)
	var r run
	select {
	case r = <-ran:
	case <-time.After(pgtest.Patience(10 * time.Second)):
		t.Fatal("the task did not run")
	}
	require.NoError(t, r.err, "sent while the term lasts")
	require.Equal(t, int32(1), calls.Load())

	require.NoError(t, w.Stop(context.Background())) // the term is over
	err = send.Work(context.WithoutCancel(r.ctx), r.job)
	require.ErrorIs(t, err, pgsched.ErrLeaseExpired)
	require.Equal(t, int32(1), calls.Load(), "nothing sent once the term is over")
}
