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

// replicaSet is worker processes of one schema: this program run again
// with -replica-of. Each child prints how many handlers it has run
// ("c N", whenever it changed) and, with -report-starts, each task's start
// ("s ORDERING_ID SCHEDULED_US STARTED_US", Unix microseconds). Counting in
// the children, not polling the database, keeps snapshots from being held
// open through a run, which would slow the very statements it measures.
type replicaSet struct {
	b       *bench
	schema  string
	starts  bool
	mu      sync.Mutex
	procs   []*replica
	started []taskStart
}

type replica struct {
	cmd  *exec.Cmd
	ran  atomic.Int64
	done chan struct{} // closed when its output ended
}

// taskStart is one task's start as a child reported it.
type taskStart struct {
	orderingID         string
	scheduled, started time.Time
}

// add starts one more worker process.
func (s *replicaSet) add(ctx context.Context) (*replica, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{"-replica-of", s.schema, "-concurrency", strconv.Itoa(s.b.conc), "-prefetch", strconv.Itoa(s.b.prefetch)}
	if s.b.leaseTTL > 0 {
		args = append(args, "-lease-ttl", s.b.leaseTTL.String())
	}
	if s.b.flexDown > 0 {
		args = append(args, "-flex-down", s.b.flexDown.String())
	}
	if s.starts {
		args = append(args, "-report-starts")
	}
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+s.b.url)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &replica{cmd: cmd, done: make(chan struct{})}
	s.mu.Lock()
	s.procs = append(s.procs, r)
	s.mu.Unlock()
	go func() {
		defer close(r.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 2 && f[0] == "c":
				if v, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					r.ran.Store(v)
				}
			case len(f) == 4 && f[0] == "s":
				sched, err1 := strconv.ParseInt(f[2], 10, 64)
				start, err2 := strconv.ParseInt(f[3], 10, 64)
				if err1 == nil && err2 == nil {
					s.mu.Lock()
					s.started = append(s.started, taskStart{orderingID: f[1], scheduled: time.UnixMicro(sched), started: time.UnixMicro(start)})
					s.mu.Unlock()
				}
			}
		}
	}()
	return r, nil
}

// ran is how many handlers the processes have run, together.
func (s *replicaSet) ran() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, r := range s.procs {
		n += r.ran.Load()
	}
	return n
}

// waitRan waits until the processes have run n handlers together.
func (s *replicaSet) waitRan(ctx context.Context, n int64) error {
	for s.ran() < n {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	return nil
}

// starts returns the task starts reported so far.
func (s *replicaSet) startsSoFar() []taskStart {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]taskStart(nil), s.started...)
}

// stop ends r with sig and waits for it.
func (r *replica) stop(sig os.Signal) {
	_ = r.cmd.Process.Signal(sig)
	<-r.done
	_ = r.cmd.Wait()
}

// close stops every process still running, gracefully.
func (s *replicaSet) close() {
	s.mu.Lock()
	procs := append([]*replica(nil), s.procs...)
	s.mu.Unlock()
	for _, r := range procs {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, r := range procs {
		<-r.done
		_ = r.cmd.Wait()
	}
}

// cpu returns the CPU time each process has used so far.
func (s *replicaSet) cpu() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]time.Duration, len(s.procs))
	for i, r := range s.procs {
		out[i] = pidCPU(r.cmd.Process.Pid)
	}
	return out
}

// waitBalanced waits until procs nodes are registered and every partition
// has a live one of them as its owner, each owning some, and returns how
// long that took.
func waitBalanced(ctx context.Context, pool *pgxpool.Pool, schema string, procs int) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(2 * time.Minute)
	for {
		var nodes, owners, unowned, most, least int
		err := pool.QueryRow(ctx, `WITH o AS (
				SELECT o.node_id, n.node_id IS NOT NULL AS live FROM `+schema+`.partition_owners o
				LEFT JOIN `+schema+`.nodes n ON n.node_id = o.node_id AND n.lease_expires_at > now() AND NOT n.leaving
			), c AS (SELECT node_id, count(*) AS k FROM o WHERE live GROUP BY node_id)
			SELECT (SELECT count(*) FROM `+schema+`.nodes WHERE lease_expires_at > now() AND NOT leaving),
			       (SELECT count(*) FROM c), (SELECT count(*) FROM o WHERE NOT live),
			       coalesce((SELECT max(k) FROM c), 0), coalesce((SELECT min(k) FROM c), 0)`).
			Scan(&nodes, &owners, &unowned, &most, &least)
		if err != nil {
			return 0, err
		}
		if nodes == procs && owners == procs && unowned == 0 && most-least <= 1 {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("partitions not spread over %d workers after 2 minutes (%d nodes, %d owners, %d partitions without a live owner)",
				procs, nodes, owners, unowned)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// replicaChild is a worker process of a replicaSet: a worker on schema
// with no-op handlers until SIGTERM.
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
	var mu sync.Mutex
	var starts []string
	w, err := b.worker(ctx, pool, schema, func(j *pgsched.Job) {
		if b.reportStarts {
			line := fmt.Sprintf("s %s %d %d", j.OrderingID, j.ScheduledAt.UnixMicro(), time.Now().UnixMicro())
			mu.Lock()
			starts = append(starts, line)
			mu.Unlock()
		}
		ran.Add(1)
	})
	if err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var told int64 = -1
	for {
		select {
		case <-ctx.Done():
			stopWorker(w)
		case <-tick.C:
		}
		mu.Lock()
		lines := starts
		starts = nil
		mu.Unlock()
		for _, l := range lines {
			fmt.Fprintln(out, l)
		}
		if v := ran.Load(); v != told {
			told = v
			fmt.Fprintf(out, "c %d\n", v)
		}
		if err := out.Flush(); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}
