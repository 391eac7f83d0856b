package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgsched/pgsched"
)

func (b *bench) enqueueSingle(ctx context.Context) (float64, error) {
	_, c, _, cleanup, err := b.fresh(ctx)
	if err != nil {
		return 0, err
	}
	defer cleanup()
	const n, workers = 20_000, 16
	at := time.Now().Add(time.Hour)
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > n {
					return
				}
				if _, err := c.Schedule(ctx, pgsched.Task{OrderingID: fmt.Sprint("s", i), ScheduledAt: at}); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, err
	}
	return n / time.Since(start).Seconds(), nil
}

func tasksFor(n, ids int, at time.Time) []pgsched.Task {
	tasks := make([]pgsched.Task, n)
	for i := range tasks {
		id := i
		if ids > 0 {
			id = i % ids
		}
		tasks[i] = pgsched.Task{OrderingID: fmt.Sprint("o", id), ScheduledAt: at.Add(time.Duration(i) * time.Microsecond)}
	}
	return tasks
}

var batchSize = 10_000

func (b *bench) enqueueBatch(ctx context.Context) (float64, error) {
	_, c, _, cleanup, err := b.fresh(ctx)
	if err != nil {
		return 0, err
	}
	defer cleanup()
	// Four callers at once, each sending 10k-task batches: what a fleet of
	// producers achieves, as the peers' batched-insert figures measure.
	tasks := tasksFor(b.n, 0, time.Now().Add(time.Hour))
	const callers = 4
	var wg sync.WaitGroup
	errs := make([]error, callers)
	start := time.Now()
	for i := range callers {
		part := tasks[i*len(tasks)/callers : (i+1)*len(tasks)/callers]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for len(part) > 0 {
				k := min(len(part), batchSize)
				if _, err := c.ScheduleMany(ctx, part[:k]); err != nil {
					errs[i] = err
					return
				}
				part = part[k:]
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return float64(len(tasks)) / time.Since(start).Seconds(), nil
}

// clock hands out strictly increasing scheduled_at times, in microseconds
// (what PostgreSQL keeps), to concurrent callers: no two tasks share a key.
type clock struct {
	mu   sync.Mutex
	last time.Time
}

// next reserves k consecutive microseconds starting no earlier than at.
func (c *clock) next(at time.Time, k int) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	at = at.Truncate(time.Microsecond)
	if !at.After(c.last) {
		at = c.last.Add(time.Microsecond)
	}
	c.last = at.Add(time.Duration(k-1) * time.Microsecond)
	return at
}

// enqueueLoad inserts n tasks from 4 callers in 10k batches. ids > 0 spreads
// them over that many ordering_ids (task i gets id i mod ids), else each has
// its own. Each batch is scheduled at offset from the moment it is sent, so
// a large backlog "due now" (offset -1s) stays inside the grace window
// however long the load takes.
func enqueueLoad(ctx context.Context, c *pgsched.Client, n, ids int, offset time.Duration) error {
	return enqueueAt(ctx, c, n, ids, func() time.Time { return time.Now().Add(offset) })
}

// enqueueAt is enqueueLoad with each batch scheduled at what at returns
// when the batch is sent (times stay distinct and increasing).
func enqueueAt(ctx context.Context, c *pgsched.Client, n, ids int, at0 func() time.Time) error {
	const callers = 4
	var clk clock
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for w := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				hi := int(next.Add(int64(batchSize)))
				lo := hi - batchSize
				if lo >= n {
					return
				}
				hi = min(hi, n)
				at := clk.next(at0(), hi-lo)
				tasks := make([]pgsched.Task, hi-lo)
				for i := range tasks {
					id := lo + i
					if ids > 0 {
						id %= ids
					}
					tasks[i] = pgsched.Task{OrderingID: fmt.Sprint("o", id), ScheduledAt: at.Add(time.Duration(i) * time.Microsecond)}
				}
				res, err := c.ScheduleMany(ctx, tasks)
				if err != nil {
					errs[w] = err
					return
				}
				for i, r := range res {
					if r != pgsched.Inserted {
						errs[w] = fmt.Errorf("task %d: %s, want %s", lo+i, r, pgsched.Inserted)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
