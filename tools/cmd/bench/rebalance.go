package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgsched/pgsched"
)

// The rebalance workload (seed 001: nodes added and removed while the
// pipeline stays within its SLA): three worker processes run a steady load
// of -rate tasks/s, half each with its own ordering_id and half over 200
// ordering_ids in order; then a fourth joins, one leaves with SIGTERM and
// one is killed with SIGKILL, one phase each. For each phase it reports the
// start lateness (start minus scheduled time, by the tasks scheduled in
// it) at p50, p99 and max, and how long after each change the partitions
// were spread evenly over the live workers again; and it checks that no
// ordering_id ran a task before an earlier one. The crash phase lasts one
// lease TTL longer: the killed worker's tasks wait for its lease to run
// out.

var rebalancePhases = []string{"steady", "join", "leave", "crash"}

func (b *bench) rebalanceWorkload() workload {
	var labels []string
	for _, p := range rebalancePhases {
		labels = append(labels,
			fmt.Sprintf("rebalance %s: lateness p50, ms", p),
			fmt.Sprintf("rebalance %s: lateness p99, ms", p),
			fmt.Sprintf("rebalance %s: lateness max, ms", p))
	}
	labels = append(labels,
		"rebalance: balanced after join, s",
		"rebalance: balanced after leave, s",
		"rebalance: served after crash, s",
		"rebalance: balanced after crash, s",
		"rebalance: tasks out of order")
	return workload{[]string{"rebalance"}, labels, b.rebalance}
}

func (b *bench) rebalance(ctx context.Context) ([]float64, error) {
	pool, c, schema, cleanup, err := b.fresh(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	set := &replicaSet{b: b, schema: schema, starts: true}
	defer set.close()
	var procs []*replica
	for range 3 {
		r, err := set.add(ctx)
		if err != nil {
			return nil, err
		}
		procs = append(procs, r)
	}
	if _, err := waitBalanced(ctx, pool, schema, 3); err != nil {
		return nil, fmt.Errorf("rebalance: %w", err)
	}
	ttl, flex := b.leaseTTL, b.flexDown
	if ttl <= 0 {
		ttl = pgsched.DefaultLeaseTTL
	}
	if flex <= 0 {
		flex = pgsched.DefaultFlexDown
	}

	pctx, stopProducer := context.WithCancel(ctx)
	defer stopProducer()
	var enqueued atomic.Int64
	produced := make(chan error, 1)
	go func() { produced <- mixedLoad(pctx, c, b.rate, &enqueued) }()

	var bounds []time.Time // start of each phase, then the end
	sleepUntil := func(t time.Time) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-produced:
			return fmt.Errorf("rebalance: the producer stopped: %v", err)
		case <-time.After(time.Until(t)):
			return nil
		}
	}
	// Each change is followed, in the background, by a wait until the
	// partitions are spread over the live workers again; the phases go on
	// meanwhile.
	var waits []chan result
	watch := func(f func() (time.Duration, error)) {
		ch := make(chan result, 1)
		waits = append(waits, ch)
		go func() {
			d, err := f()
			ch <- result{d.Seconds(), err}
		}()
	}
	since := func(at time.Time, f func() (time.Duration, error)) func() (time.Duration, error) {
		return func() (time.Duration, error) {
			if _, err := f(); err != nil {
				return 0, err
			}
			return time.Since(at), nil
		}
	}
	balancedFor := func(live int) func() (time.Duration, error) {
		return func() (time.Duration, error) { return waitBalanced(ctx, pool, schema, live) }
	}

	bounds = append(bounds, time.Now())
	if err := sleepUntil(bounds[0].Add(b.phase)); err != nil {
		return nil, err
	}
	bounds = append(bounds, time.Now())
	r, err := set.add(ctx)
	if err != nil {
		return nil, err
	}
	procs = append(procs, r)
	watch(since(bounds[1], balancedFor(4)))
	if err := sleepUntil(bounds[1].Add(b.phase)); err != nil {
		return nil, err
	}
	bounds = append(bounds, time.Now())
	left := make(chan struct{})
	go func() { defer close(left); procs[0].stop(syscall.SIGTERM) }()
	watch(since(bounds[2], balancedFor(3)))
	if err := sleepUntil(bounds[2].Add(b.phase)); err != nil {
		return nil, err
	}
	bounds = append(bounds, time.Now())
	if err := procs[1].cmd.Process.Kill(); err != nil {
		return nil, err
	}
	watch(since(bounds[3], func() (time.Duration, error) { return waitServed(ctx, pool, schema, 2) }))
	watch(since(bounds[3], balancedFor(2)))
	if err := sleepUntil(bounds[3].Add(b.phase + ttl)); err != nil {
		return nil, err
	}
	stopProducer()
	<-produced
	bounds = append(bounds, time.Now())
	<-left
	var balanced []float64
	for _, ch := range waits {
		r := <-ch
		if r.err != nil {
			return nil, fmt.Errorf("rebalance: %w", r.err)
		}
		balanced = append(balanced, r.v)
	}

	drain, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := set.waitRan(drain, enqueued.Load()); err != nil {
		return nil, fmt.Errorf("rebalance: waiting for %d tasks to run: %w", enqueued.Load(), err)
	}
	if err := waitEmpty(drain, pool, schema); err != nil {
		return nil, fmt.Errorf("rebalance: waiting for every outcome: %w", err)
	}

	starts := set.startsSoFar()
	var out []float64
	line := "rebalance: start lateness p50/p99/max, ms:"
	for i, name := range rebalancePhases {
		var lat []time.Duration
		for _, s := range starts {
			if !s.scheduled.Before(bounds[i]) && s.scheduled.Before(bounds[i+1]) {
				lat = append(lat, s.started.Sub(s.scheduled))
			}
		}
		if len(lat) == 0 {
			return nil, fmt.Errorf("rebalance: no task scheduled in the %s phase started", name)
		}
		ps := percentiles(lat, 50, 99)
		most := slices.Max(lat).Seconds() * 1000
		out = append(out, ps[0], ps[1], most)
		line += fmt.Sprintf(" %s %.1f/%.1f/%.0f (%d tasks);", name, ps[0], ps[1], most, len(lat))
	}
	disorder := outOfOrder(starts)
	out = append(out, balanced...)
	out = append(out, float64(disorder))
	fmt.Fprintf(os.Stderr, "%s balanced again after join %.2f s, leave %.2f s; after the crash every partition served again in %.2f s (lease TTL %s), spread evenly in %.2f s (FlexDown %s); %d tasks, %d out of order\n",
		line, balanced[0], balanced[1], balanced[2], ttl, balanced[3], flex, enqueued.Load(), disorder)
	return out, nil
}

type result struct {
	v   float64
	err error
}

// waitServed waits until live nodes are registered (a killed one's lease
// has run out) and every partition whose owner is not live has a live
// backup standing in for it, and returns how long that took.
func waitServed(ctx context.Context, pool *pgxpool.Pool, schema string, live int) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(2 * time.Minute)
	for {
		var nodes, orphans int
		err := pool.QueryRow(ctx, `WITH live AS (
				SELECT node_id FROM `+schema+`.nodes WHERE lease_expires_at > now() AND NOT leaving)
			SELECT (SELECT count(*) FROM live),
			       (SELECT count(*) FROM `+schema+`.partition_owners o
			        WHERE o.node_id NOT IN (SELECT node_id FROM live)
			          AND NOT EXISTS (SELECT 1 FROM `+schema+`.backups b
			                          WHERE b.node_id = o.node_id AND b.backup_node_id IN (SELECT node_id FROM live)))`).
			Scan(&nodes, &orphans)
		if err != nil {
			return 0, err
		}
		if nodes == live && orphans == 0 {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("partitions not served by %d live workers after 2 minutes (%d live, %d partitions with no live owner or backup)", live, nodes, orphans)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// outOfOrder counts starts that came after the start of a task of the
// same ordering_id scheduled later.
func outOfOrder(starts []taskStart) int {
	byKey := map[string][]taskStart{}
	for _, s := range starts {
		byKey[s.orderingID] = append(byKey[s.orderingID], s)
	}
	n := 0
	for _, ss := range byKey {
		slices.SortFunc(ss, func(a, b taskStart) int { return a.started.Compare(b.started) })
		var latest time.Time
		for _, s := range ss {
			if s.scheduled.Before(latest) {
				n++
			}
			if s.scheduled.After(latest) {
				latest = s.scheduled
			}
		}
	}
	return n
}

// mixedLoad enqueues rate tasks/s until ctx ends, each due 50 ms after it
// is sent: half with an ordering_id of its own, half over 200 ordering_ids
// in order. It counts what it enqueued in n.
func mixedLoad(ctx context.Context, c *pgsched.Client, rate int, n *atomic.Int64) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	var clk clock
	total := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		due := int(float64(rate) * time.Since(start).Seconds())
		if due <= total {
			continue
		}
		at := clk.next(time.Now().Add(50*time.Millisecond), due-total)
		tasks := make([]pgsched.Task, due-total)
		for i := range tasks {
			k := total + i
			id := fmt.Sprint("u", k)
			if k%2 == 1 {
				id = fmt.Sprint("k", (k/2)%200)
			}
			tasks[i] = pgsched.Task{OrderingID: id, ScheduledAt: at.Add(time.Duration(i) * time.Microsecond)}
		}
		if _, err := c.ScheduleMany(context.WithoutCancel(ctx), tasks); err != nil {
			return err
		}
		total = due
		n.Store(int64(total))
	}
}
