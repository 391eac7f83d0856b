package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgsched/pgsched/internal/localpg"
)

// receiver is the webhook every worker delivers to. The URL path names the
// delivering node. It records each request with its own clock and holds it
// a few milliseconds, so two deliveries of one ordering_id that run at once
// show as overlapping intervals.
type receiver struct {
	minHold, maxHold time.Duration
	failing          atomic.Bool // answer 500 to everything

	mu         sync.Mutex
	deliveries []Delivery

	srv *http.Server
	url string
}

// body is the JSON cmd/worker posts (see internal/webhook).
type body struct {
	OrderingID    string `json:"ordering_id"`
	ScheduledAt   string `json:"scheduled_at"`
	UniquenessKey string `json:"uniqueness_key"`
	Kind          string `json:"kind"`
	Attempt       int    `json:"attempt"`
}

func startReceiver(logger *slog.Logger) (*receiver, error) {
	ln, err := localpg.Listen()
	if err != nil {
		return nil, fmt.Errorf("receiver: %w", err)
	}
	r := &receiver{minHold: 2 * time.Millisecond, maxHold: 10 * time.Millisecond, url: "http://" + ln.Addr().String()}
	r.srv = &http.Server{
		Handler:           http.HandlerFunc(r.serve),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	node := strings.Trim(req.URL.Path, "/")
	var b body
	raw, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(raw, &b)
	}
	var at time.Time
	if err == nil {
		at, err = time.Parse(time.RFC3339Nano, b.ScheduledAt)
	}
	status := http.StatusOK
	switch {
	case err != nil:
		status = http.StatusBadRequest
	case r.failing.Load():
		status = http.StatusInternalServerError
	}
	aborted := false
	hold := r.minHold + rand.N(r.maxHold-r.minHold+1)
	t := time.NewTimer(hold)
	select {
	case <-t.C:
	case <-req.Context().Done():
		// The worker hung up (killed, or its lease ended): the work is
		// still done, as a real webhook's would be.
		<-t.C
		aborted = true
	}
	d := Delivery{
		Node: node, OrderingID: b.OrderingID, ScheduledAt: at, UniquenessKey: b.UniquenessKey,
		Attempt: b.Attempt, Start: start, End: time.Now(), Status: status, Aborted: aborted,
	}
	r.mu.Lock()
	r.deliveries = append(r.deliveries, d)
	r.mu.Unlock()
	if status != http.StatusOK {
		http.Error(w, http.StatusText(status), status)
		return
	}
	w.WriteHeader(status)
}

// failFor answers 500 to everything for d.
func (r *receiver) failFor(ctx context.Context, d time.Duration) {
	r.failing.Store(true)
	defer r.failing.Store(false)
	sleep(ctx, d)
}

func (r *receiver) snapshot() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.deliveries)
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.deliveries)
}

func (r *receiver) close(ctx context.Context) error {
	if err := r.srv.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("receiver: %w", err)
	}
	return nil
}
