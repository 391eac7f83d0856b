package main

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/pgsched/pgsched"
)

// limitedWorkload is the cost of a concurrency limit: tasks of one kind
// limited to -limited-max running at once, enqueued at a steady
// -limited-rate, each taking -limited-hold in its handler (a call to a
// remote service); room enough for the rate if the limit is kept busy.
func (b *bench) limitedWorkload() workload {
	return workload{[]string{"limited"}, []string{
		"limited: completed, tasks/s",
		"limited: lateness p50, ms",
		"limited: lateness p99, ms",
		"limited: most running at once",
	}, b.limited}
}

func (b *bench) limited(ctx context.Context) ([]float64, error) {
	pool, c, schema, cleanup, err := b.fresh(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if _, err := c.SetLimit(ctx, "default", pgsched.Limit{MaxRunning: b.limitedMax}); err != nil {
		return nil, err
	}
	var l latencies
	var running, most atomic.Int64
	w, err := b.worker(ctx, pool, schema, func(j *pgsched.Job) {
		l.record(j)
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(b.limitedHold)
		running.Add(-1)
	})
	if err != nil {
		return nil, err
	}
	defer stopWorker(w)
	start := time.Now()
	total, err := steady(ctx, c, "l", b.limitedRate, b.duration)
	if err != nil {
		return nil, err
	}
	if total == 0 {
		return nil, errors.New("no task enqueued: -lateness-duration too short")
	}
	lat, err := l.waitFor(ctx, total, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	rate := float64(total) / time.Since(start).Seconds()
	p := percentiles(lat, 50, 99)
	return []float64{rate, p[0], p[1], float64(most.Load())}, nil
}
