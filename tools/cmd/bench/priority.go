package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/pgsched/pgsched"
)

// priorityWorkload is what priorities are for: -backlog tasks at the
// default priority, due already, draining at full speed, while tasks of
// priority 10 arrive at -priority-rate: how late do those start? They
// start arriving once the drain runs (its first task started): before
// that the worker is still starting (term, partitions), and a task due
// then waits for that, whatever its priority; the start is a figure of
// its own.
func (b *bench) priorityWorkload() workload {
	return workload{[]string{"priority"}, []string{
		fmt.Sprintf("priority: %s backlog at 0, drain, tasks/s", short(b.backlogN)),
		fmt.Sprintf("priority: %d/s at 10 during the drain, lateness p50, ms", b.priorityRate),
		fmt.Sprintf("priority: %d/s at 10 during the drain, lateness p99, ms", b.priorityRate),
		"priority: worker start to the drain's first task, ms",
	}, b.priority}
}

func (b *bench) priority(ctx context.Context) ([]float64, error) {
	pool, c, schema, cleanup, err := b.freshBacklog(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	m := b.backlogN
	var high latencies
	var low atomic.Int64
	running := make(chan struct{})
	start := time.Now()
	w, err := b.worker(ctx, pool, schema, func(j *pgsched.Job) {
		if j.Priority > 0 {
			high.record(j)
			return
		}
		if low.Add(1) == 1 {
			close(running)
		}
	})
	if err != nil {
		return nil, err
	}
	defer stopWorker(w)
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-running:
	}
	first := time.Since(start)
	sending := time.Now()
	// Tasks of priority 10 in 10 ms ticks, each due 50 ms after it is sent
	// (the measure is the scheduler's, not the enqueue's), until nine
	// tenths of the backlog has run.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	sent := 0
	for low.Load() < int64(m)*9/10 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		due := int(float64(b.priorityRate) * time.Since(sending).Seconds())
		if due <= sent {
			continue
		}
		at := time.Now().Add(50 * time.Millisecond)
		tasks := make([]pgsched.Task, due-sent)
		for i := range tasks {
			tasks[i] = pgsched.Task{OrderingID: fmt.Sprint("hi", sent+i), ScheduledAt: at, Priority: 10}
		}
		if _, err := c.ScheduleMany(ctx, tasks); err != nil {
			return nil, err
		}
		sent = due
	}
	lat, err := high.waitFor(ctx, sent, time.Minute)
	if err != nil {
		return nil, err
	}
	if err := waitEmpty(ctx, pool, schema); err != nil {
		return nil, err
	}
	drain := float64(m) / time.Since(start).Seconds()
	p := percentiles(lat, 50, 99)
	return []float64{drain, p[0], p[1], float64(first.Microseconds()) / 1000}, nil
}
