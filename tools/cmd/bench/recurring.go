package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/pgsched/pgsched"
)

// recurringWorkload: -schedules recurring schedules each ticking once a
// minute, spread over the minute's seconds ("s * * * * *" with s = i mod
// 60), on one worker that does nothing else. Over one whole minute it
// measures the CPU the worker process and the rest of the machine
// (PostgreSQL) spend, and how late each tick starts after its time.
func (b *bench) recurringWorkload() workload {
	n := short(b.schedules)
	return workload{[]string{"recurring", "h"}, []string{
		fmt.Sprintf("recurring %s/min: worker CPU, millicores", n),
		fmt.Sprintf("recurring %s/min: PostgreSQL and rest, millicores", n),
		fmt.Sprintf("recurring %s/min: tick lateness p50, ms", n),
		fmt.Sprintf("recurring %s/min: tick lateness p99, ms", n),
	}, b.recurringRun}
}

func (b *bench) recurringRun(ctx context.Context) ([]float64, error) {
	pool, _, schema, cleanup, err := b.fresh(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	_, err = pool.Exec(ctx, `SELECT `+schema+`.recurring_upsert('r' || i, (i % 60) || ' * * * * *', 'tick')
		FROM generate_series(1, $1) AS i`, b.schedules)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var window time.Time
	var lat []time.Duration
	w, err := b.worker(ctx, pool, schema, func(j *pgsched.Job) {
		started := time.Now()
		tick, err := time.Parse(time.RFC3339, strings.TrimPrefix(j.UniquenessKey, "tick "))
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !window.IsZero() && !tick.Before(window) && tick.Before(window.Add(time.Minute)) {
			lat = append(lat, started.Sub(tick))
		}
	})
	if err != nil {
		return nil, err
	}
	defer stopWorker(w)
	// Measure the first whole minute that starts at least 15 s from now
	// (the leader is elected and the first ticks created).
	start := time.Now().Add(15 * time.Second).Truncate(time.Minute).Add(time.Minute)
	mu.Lock()
	window = start
	mu.Unlock()
	if err := sleepUntil(ctx, start); err != nil {
		return nil, err
	}
	cpu := sampleCPU()
	if err := sleepUntil(ctx, start.Add(time.Minute)); err != nil {
		return nil, err
	}
	self, rest, _ := cpuCores(cpu)
	// The minute's last ticks may still be starting.
	if err := sleepUntil(ctx, start.Add(time.Minute+2*time.Second)); err != nil {
		return nil, err
	}
	mu.Lock()
	got := append([]time.Duration(nil), lat...)
	mu.Unlock()
	if len(got) < b.schedules {
		return nil, fmt.Errorf("%d of %d ticks of the minute ran", len(got), b.schedules)
	}
	p := percentiles(got, 50, 99)
	fmt.Fprintf(os.Stderr, "recurring: %d ticks in the minute from %s; worker %.3f cores, rest %.3f\n",
		len(got), start.Format(time.TimeOnly), self, rest)
	return []float64{1000 * self, 1000 * rest, p[0], p[1]}, nil
}

func sleepUntil(ctx context.Context, at time.Time) error {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
