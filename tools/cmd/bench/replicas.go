package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgsched/pgsched"
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
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	var children []*exec.Cmd
	defer func() {
		for _, cmd := range children {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, cmd := range children {
			_ = cmd.Wait()
		}
	}()
	// Each child prints how many handlers it has run so far; polling the
	// database instead would hold snapshots open through the run and slow
	// the very statements it measures.
	counts := make([]atomic.Int64, procs)
	enough := make(chan struct{})
	var closeOnce sync.Once
	for i := range procs {
		cmd := exec.CommandContext(ctx, self, "-replica-of", schema,
			"-concurrency", strconv.Itoa(b.conc), "-prefetch", strconv.Itoa(b.prefetch))
		cmd.Env = append(os.Environ(), "DATABASE_URL="+b.url)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return 0, err
		}
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		children = append(children, cmd)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				v, err := strconv.ParseInt(sc.Text(), 10, 64)
				if err != nil {
					continue
				}
				counts[i].Store(v)
				var sum int64
				for j := range counts {
					sum += counts[j].Load()
				}
				if sum >= int64(b.n) {
					closeOnce.Do(func() { close(enough) })
				}
			}
		}()
	}
	if err := waitBalanced(ctx, pool, schema, procs); err != nil {
		return 0, err
	}

	due := time.Now().Add(replicaDelay).Truncate(time.Millisecond)
	if err := enqueueAt(ctx, c, b.n, ids, func() time.Time { return due }); err != nil {
		return 0, err
	}
	if late := time.Since(due); late > 0 {
		fmt.Fprintf(os.Stderr, "replicas: the enqueue ended %s after the tasks fell due; the figure includes some of it\n", late.Round(time.Millisecond))
	}
	time.Sleep(time.Until(due))
	servers, workers := serverCPU(), processCPU(children)
	select {
	case <-enough:
	case <-ctx.Done():
		return 0, ctx.Err()
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
	for i, after := range processCPU(children) {
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

// waitBalanced waits until procs nodes are registered and every partition
// has one of them as its owner, each owning some.
func waitBalanced(ctx context.Context, pool *pgxpool.Pool, schema string, procs int) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var nodes, owners, unowned int
		err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+schema+`.nodes WHERE lease_expires_at > now() AND NOT leaving),
			count(DISTINCT o.node_id), count(*) FILTER (WHERE o.node_id IS NULL OR n.node_id IS NULL)
			FROM `+schema+`.partition_owners o LEFT JOIN `+schema+`.nodes n ON n.node_id = o.node_id AND n.lease_expires_at > now()`).
			Scan(&nodes, &owners, &unowned)
		if err != nil {
			return err
		}
		if nodes == procs && owners == procs && unowned == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replicas: partitions not spread over %d workers after 2 minutes (%d nodes, %d owners, %d partitions without a live owner)",
				procs, nodes, owners, unowned)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// processCPU returns the CPU time each child has used so far.
func processCPU(children []*exec.Cmd) []time.Duration {
	out := make([]time.Duration, len(children))
	for i, cmd := range children {
		out[i] = pidCPU(cmd.Process.Pid)
	}
	return out
}

// replicaChild is a worker process of the replicas workload: a worker on
// schema with no-op handlers until SIGTERM.
func (b *bench) replicaChild(ctx context.Context, schema string) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM)
	defer stop()
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		return errors.New("-replica-of needs DATABASE_URL")
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return err
	}
	cfg.MaxConns = 50 // as the in-process burn-downs' pool
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	var ran atomic.Int64
	w, err := b.worker(ctx, pool, schema, func(*pgsched.Job) { ran.Add(1) })
	if err != nil {
		return err
	}
	// Tell the parent how many handlers ran, whenever it changed.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var told int64 = -1
	for {
		select {
		case <-ctx.Done():
			stopWorker(w)
			return nil
		case <-tick.C:
			if v := ran.Load(); v != told {
				told = v
				fmt.Println(v)
			}
		}
	}
}
