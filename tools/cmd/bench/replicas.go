package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// The replicas workload: the two burn-downs with 1, 2 and 4 worker
// processes sharing one server, each process configured as the single one
// is (concurrency, prefetch), as a user adds replicas. On a machine whose
// cores the server already keeps busy the total cannot grow, so what the
// figures show is what coordinating more processes costs: leases,
// partition assignment, claims split over more nodes.
//
// The workers start first, on an empty schema, and the run waits until the
// leader has spread the partitions over all of them; then the tasks are
// enqueued due at one moment a few seconds on, and the burn-down is timed
// from that moment until every outcome is recorded.

// replicaDelay is how far ahead of the enqueue the tasks fall due: long
// enough for the enqueue to finish first.
const replicaDelay = 5 * time.Second

func (b *bench) replicasWorkload() workload {
	var labels []string
	for _, what := range []string{"own", "ordered"} {
		for _, p := range b.replicaCounts {
			labels = append(labels, fmt.Sprintf("replicas %s, %d proc, tasks/s", what, p))
		}
		last := b.replicaCounts[len(b.replicaCounts)-1]
		labels = append(labels, fmt.Sprintf("replicas %s, %d / %d proc, %% per run", what, last, b.replicaCounts[0]))
	}
	return workload{[]string{"replicas"}, labels, b.replicas}
}

func (b *bench) replicas(ctx context.Context) ([]float64, error) {
	var out []float64
	for _, ids := range []int{0, 1000} {
		var one float64
		for i, procs := range b.replicaCounts {
			rate, err := b.replicaRun(ctx, ids, procs)
			if err != nil {
				return nil, err
			}
			if i == 0 {
				one = rate
			}
			out = append(out, rate)
		}
		out = append(out, 100*out[len(out)-1]/one)
	}
	return out, nil
}

// replicaRun burns down b.n tasks (over ids ordering_ids, 0: each its own)
// with procs worker processes and returns the tasks/s.
func (b *bench) replicaRun(ctx context.Context, ids, procs int) (float64, error) {
	pool, c, schema, cleanup, err := b.fresh(ctx)
	if err != nil {
		return 0, err
	}
	defer cleanup()
	set := &replicaSet{b: b, schema: schema}
	defer set.close()
	for range procs {
		if _, err := set.add(ctx); err != nil {
			return 0, err
		}
	}
	if _, err := waitBalanced(ctx, pool, schema, procs); err != nil {
		return 0, fmt.Errorf("replicas: %w", err)
	}

	due := time.Now().Add(replicaDelay).Truncate(time.Millisecond)
	if err := enqueueAt(ctx, c, b.n, ids, func() time.Time { return due }); err != nil {
		return 0, err
	}
	if late := time.Since(due); late > 0 {
		fmt.Fprintf(os.Stderr, "replicas: the enqueue ended %s after the tasks fell due; the figure includes some of it\n", late.Round(time.Millisecond))
	}
	time.Sleep(time.Until(due))
	servers, workers := serverCPU(), set.cpu()
	if err := set.waitRan(ctx, int64(b.n)); err != nil {
		return 0, err
	}
	if err := waitEmpty(ctx, pool, schema); err != nil {
		return 0, err
	}
	took := time.Since(due)
	rate := float64(b.n) / took.Seconds()

	what := "own ordering_id"
	if ids > 0 {
		what = fmt.Sprintf("%d ordering_ids", ids)
	}
	var each []string
	var sum time.Duration
	for i, after := range set.cpu() {
		d := after - workers[i]
		sum += d
		each = append(each, fmt.Sprintf("%.2f", float64(d.Microseconds())/float64(b.n)))
	}
	line := fmt.Sprintf("replicas, %s, %d process(es): %.0f tasks/s; worker CPU per task %.2f µs summed (%s by process)",
		what, procs, rate, float64(sum.Microseconds())/float64(b.n), strings.Join(each, ", "))
	if s := serverCPUPerTask(servers, serverCPU(), b.n); s != "" {
		line += "; PostgreSQL CPU per 1000 tasks: " + s
	}
	fmt.Fprintln(os.Stderr, line)
	return rate, nil
}
