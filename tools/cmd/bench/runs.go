package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgsched/pgsched"
)

func (b *bench) burn(ctx context.Context, ids int) (float64, error) {
	pool, c, schema, cleanup, err := b.fresh(ctx)
	if err != nil {
		return 0, err
	}
	defer cleanup()
	// Due now (within the grace window): the backlog is there before the
	// worker starts, as in the peers' burn-down benchmarks.
	enqueued := serverCPU()
	ectx := ctx
	if b.tracing != nil {
		// Enqueued inside a span: every task stores its traceparent.
		var span trace.Span
		ectx, span = b.tracing.tp.Tracer("bench").Start(ctx, "enqueue")
		defer span.End()
	}
	if err := enqueueLoad(ectx, c, b.n, ids, -time.Second); err != nil {
		return 0, err
	}
	cpu, servers, mem := sampleCPU(), serverCPU(), sampleMem()
	if s := serverCPUPerTask(enqueued, servers, b.n); s != "" && b.citus {
		fmt.Fprintf(os.Stderr, "enqueue, %d ids: PostgreSQL CPU per 1000 tasks by data directory: %s\n", ids, s)
	}
	var sessions map[string]int64
	if b.citus {
		sessions = citusSessions(ctx, pool)
	}
	rate, err := b.burnLoaded(ctx, pool, schema)
	if err != nil {
		return 0, err
	}
	if s := serverCPUPerTask(servers, serverCPU(), b.n); s != "" {
		fmt.Fprintf(os.Stderr, "burn-down, %d ids: PostgreSQL CPU per 1000 tasks by data directory: %s\n", ids, s)
	}
	if b.citus {
		after := citusSessions(ctx, pool)
		var parts []string
		for _, node := range slices.Sorted(maps.Keys(after)) {
			if before, ok := sessions[node]; ok {
				parts = append(parts, fmt.Sprintf("%s %.1f", node, float64(after[node]-before)*1000/float64(b.n)))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(os.Stderr, "burn-down on Citus, %d ids: connections opened per 1000 tasks by server: %s\n", ids, strings.Join(parts, ", "))
		}
	}
	what := "own ordering_id"
	if ids > 0 {
		what = fmt.Sprintf("%d ordering_ids", ids)
	}
	fmt.Fprintf(os.Stderr, "burn-down, %s: per task in this process: %s\n", what, perTask(cpu, mem, b.n))
	if s := cpuSplit(cpu); s != "" {
		fmt.Fprintf(os.Stderr, "burn-down, %s: %.0f tasks/s; %s\n", what, rate, s)
	}
	if b.citus {
		if s, err := citusStatements(ctx, pool, schema, b.n); err != nil {
			fmt.Fprintf(os.Stderr, "burn-down on Citus, %d ids: no statement counts: %v\n", ids, err)
		} else {
			fmt.Fprintf(os.Stderr, "burn-down on Citus, %d ids: %s\n", ids, s)
		}
	}
	return rate, nil
}

// serverCPUPerTask says how much CPU each PostgreSQL server (by data
// directory) spent per 1000 of n tasks between two serverCPU samples.
func serverCPUPerTask(before, after map[string]time.Duration, n int) string {
	var parts []string
	for _, dir := range slices.Sorted(maps.Keys(after)) {
		if ms := (after[dir] - before[dir]).Seconds() * 1000 * 1000 / float64(n); ms >= 0.5 {
			parts = append(parts, fmt.Sprintf("%s %.0f ms", dir, ms))
		}
	}
	return strings.Join(parts, ", ")
}

// citusStatements says how many statements on task tables the coordinator
// ran per task over a run (enqueue, claims, finishes, maintenance), from
// citus_stat_statements: routed whole to one worker (Citus recorded a
// partition key, or an INSERT ... SELECT from the partition's row of
// partition_anchor, which Citus sends whole but records without one),
// and the others (statements Citus split into steps, and the
// maintenance scans that read every partition).
func citusStatements(ctx context.Context, pool *pgxpool.Pool, schema string, n int) (string, error) {
	var whole, other int64
	err := pool.QueryRow(ctx, `SELECT
			coalesce(sum(calls) FILTER (WHERE partition_key IS NOT NULL OR strpos(query, 'partition_anchor') > 0), 0)::bigint,
			coalesce(sum(calls) FILTER (WHERE partition_key IS NULL AND strpos(query, 'partition_anchor') = 0), 0)::bigint
		FROM citus_stat_statements
		WHERE query ~ ('(^|[^a-z_])' || $1 || '\.(heads|backlog|completions|dead_tasks)([^a-z_]|$)')`, schema).Scan(&whole, &other)
	if err != nil {
		return "", fmt.Errorf("reading citus_stat_statements (the coordinator needs pg_stat_statements loaded): %w", err)
	}
	return fmt.Sprintf("task-table statements per task: %.3f routed whole, %.3f split or spread", float64(whole)/float64(n), float64(other)/float64(n)), nil
}

// citusSessions reads how many sessions each server of the Citus cluster
// has opened so far (pg_stat_database.sessions), by host:port; empty when
// it cannot (the figure is then left out).
func citusSessions(ctx context.Context, pool *pgxpool.Pool) map[string]int64 {
	type row struct {
		Node     string
		Sessions int64
	}
	rows, err := pool.Query(ctx, `SELECT 'coordinator', sessions FROM pg_stat_database WHERE datname = current_database()
		UNION ALL
		SELECT nodename || ':' || nodeport, result::bigint
		FROM run_command_on_workers('SELECT sessions FROM pg_stat_database WHERE datname = current_database()') WHERE success`)
	if err != nil {
		return nil
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		return nil
	}
	out := make(map[string]int64, len(got))
	for _, r := range got {
		out[r.Node] = r.Sessions
	}
	return out
}

// burnLoaded starts a worker on schema, where b.n due tasks wait, and
// returns the rate at which it runs them all, from its start until every
// outcome is recorded.
func (b *bench) burnLoaded(ctx context.Context, pool *pgxpool.Pool, schema string) (float64, error) {
	var done atomic.Int64
	finished := make(chan struct{})
	start := time.Now()
	w, err := b.worker(ctx, pool, schema, func(*pgsched.Job) {
		if done.Add(1) == int64(b.n) {
			close(finished)
		}
	})
	if err != nil {
		return 0, err
	}
	defer stopWorker(w)
	select {
	case <-finished:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if err := waitEmpty(ctx, pool, schema); err != nil {
		return 0, err
	}
	return float64(b.n) / time.Since(start).Seconds(), nil
}

func (b *bench) burnOwn(ctx context.Context) (float64, error)     { return b.burn(ctx, 0) }
func (b *bench) burnOrdered(ctx context.Context) (float64, error) { return b.burn(ctx, 1000) }

// percentiles returns the p-th percentiles of lat in milliseconds.
func percentiles(lat []time.Duration, ps ...int) []float64 {
	slices.Sort(lat)
	out := make([]float64, len(ps))
	for i, p := range ps {
		out[i] = lat[min(len(lat)*p/100, len(lat)-1)].Seconds() * 1000
	}
	return out
}

func (b *bench) latenessRun(ctx context.Context) ([]float64, error) {
	lat, err := b.lateness(ctx)
	if err != nil {
		return nil, err
	}
	return percentiles(lat, 50, 99), nil
}

// latencies collects start-minus-due times from a handler.
type latencies struct {
	mu  sync.Mutex
	lat []time.Duration
}

func (l *latencies) record(j *pgsched.Job) {
	d := time.Since(j.ScheduledAt)
	l.mu.Lock()
	l.lat = append(l.lat, d)
	l.mu.Unlock()
}

func (l *latencies) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lat)
}

// waitFor waits until n samples are in, or fails after timeout.
func (l *latencies) waitFor(ctx context.Context, n int, timeout time.Duration) ([]time.Duration, error) {
	deadline := time.Now().Add(timeout)
	for l.len() < n {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("only %d of %d tasks ran within %s", l.len(), n, timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lat), nil
}

// steady enqueues rate tasks/s for d in 10 ms ticks, each scheduled 50 ms
// ahead so the measure is the scheduler's, not the enqueue's, latency.
// ordering_ids are prefix plus a sequence number. It returns how many.
func steady(ctx context.Context, c *pgsched.Client, prefix string, rate int, d time.Duration) (int, error) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	total := 0
	for time.Since(start) < d {
		select {
		case <-ctx.Done():
			return total, ctx.Err()
		case <-tick.C:
		}
		due := int(float64(rate) * time.Since(start).Seconds())
		if due <= total {
			continue
		}
		at := time.Now().Add(50 * time.Millisecond)
		tasks := make([]pgsched.Task, due-total)
		for i := range tasks {
			tasks[i] = pgsched.Task{OrderingID: fmt.Sprint(prefix, total+i), ScheduledAt: at}
		}
		if _, err := c.ScheduleMany(ctx, tasks); err != nil {
			return total, err
		}
		total = due
	}
	return total, nil
}

// lateness enqueues tasks due "now" at a steady rate and measures, in the
// handler, how late each started.
func (b *bench) lateness(ctx context.Context) ([]time.Duration, error) {
	pool, c, schema, cleanup, err := b.fresh(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	var l latencies
	w, err := b.worker(ctx, pool, schema, l.record)
	if err != nil {
		return nil, err
	}
	defer stopWorker(w)
	total, err := steady(ctx, c, "l", b.rate, b.duration)
	if err != nil {
		return nil, err
	}
	if total == 0 {
		return nil, errors.New("no task enqueued: -lateness-duration too short")
	}
	return l.waitFor(ctx, total, time.Minute)
}

// sustained runs one worker for -sustained-duration while due tasks keep
// arriving: a producer keeps -sustained-backlog of them waiting, as River's
// duration mode does (its riverbench, cmd/river bench -duration), so the
// producers cost what enqueueing at the workers' pace costs; with
// -sustained-backlog 0, -sustained-producers enqueue without pause (or at
// -sustained-rate). The window starts once the first backlog is in. It
// returns completed and enqueued tasks/s over the window and the tasks
// pending or running at its end.
func (b *bench) sustained(ctx context.Context) ([]float64, error) {
	pool, c, schema, cleanup, err := b.fresh(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	var done, enqueued atomic.Int64
	w, err := b.worker(ctx, pool, schema, func(*pgsched.Job) { done.Add(1) })
	if err != nil {
		return nil, err
	}
	defer stopWorker(w)

	pctx, stopProducers := context.WithCancel(ctx)
	defer stopProducers()
	var wg sync.WaitGroup
	errs := make([]error, b.sustainedProducers)
	enqueue := func(p, seq int) error {
		at := time.Now()
		tasks := make([]pgsched.Task, b.sustainedBatch)
		for i := range tasks {
			tasks[i] = pgsched.Task{OrderingID: fmt.Sprintf("p%d-%d", p, seq+i), ScheduledAt: at}
		}
		if _, err := c.ScheduleMany(pctx, tasks); err != nil {
			if pctx.Err() != nil {
				return pctx.Err()
			}
			return err
		}
		enqueued.Add(int64(len(tasks)))
		return nil
	}
	ready := make(chan struct{})
	if b.sustainedBacklog > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[0] = topUp(pctx, ready, b.sustainedBacklog, func() int64 { return enqueued.Load() - done.Load() },
				func(seq int) error { return enqueue(0, seq*b.sustainedBatch) })
		}()
	} else {
		close(ready)
		start := time.Now()
		for p := range b.sustainedProducers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for seq := 0; pctx.Err() == nil; seq += b.sustainedBatch {
					if b.sustainedRate > 0 {
						// Each producer keeps to its share of the rate.
						share := float64(b.sustainedRate) / float64(b.sustainedProducers)
						ahead := time.Duration(float64(seq)/share*float64(time.Second)) - time.Since(start)
						if ahead > 0 {
							select {
							case <-pctx.Done():
								return
							case <-time.After(ahead):
							}
						}
					}
					if err := enqueue(p, seq); err != nil {
						errs[p] = err
						return
					}
				}
			}()
		}
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-ready:
	}
	start, done0, enqueued0 := time.Now(), done.Load(), enqueued.Load()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(b.sustainedDuration):
	}
	completed, added := done.Load()-done0, enqueued.Load()-enqueued0
	elapsed := time.Since(start).Seconds()
	stopProducers()
	wg.Wait()
	for i, err := range errs {
		if errors.Is(err, context.Canceled) {
			errs[i] = nil // the producers were stopped
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var backlog int64
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".tasks").Scan(&backlog); err != nil {
		return nil, err
	}
	return []float64{float64(completed) / elapsed, float64(added) / elapsed, float64(backlog)}, nil
}

// topUp keeps at least backlog tasks waiting (left says how many are), as
// River's duration mode does: every 250 ms, while fewer are left, it calls
// enqueue (with a batch number counting from 0) until there are. It
// closes ready once the first backlog is in, or when it returns: on a
// failed enqueue, or with ctx's error once ctx is done.
func topUp(ctx context.Context, ready chan<- struct{}, backlog int, left func() int64, enqueue func(int) error) error {
	var once sync.Once
	defer once.Do(func() { close(ready) })
	for batch := 0; ; {
		for left() < int64(backlog) {
			if err := enqueue(batch); err != nil {
				return err
			}
			batch++
		}
		once.Do(func() { close(ready) })
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// backlogWindow is how many completions the first and last drain rates span:
// 100k, or half the backlog when it is smaller than 200k.
func (b *bench) backlogWindow() int { return min(100_000, b.backlogN/2) }

// freshBacklog is fresh with -backlog tasks already due enqueued and the
// tables analyzed.
func (b *bench) freshBacklog(ctx context.Context) (*pgxpool.Pool, *pgsched.Client, string, func(), error) {
	pool, c, schema, cleanup, err := b.fresh(ctx)
	if err != nil {
		return nil, nil, "", nil, err
	}
	err = enqueueLoad(ctx, c, b.backlogN, 0, -time.Second)
	if err == nil {
		err = analyze(ctx, pool, schema)
	}
	if err != nil {
		cleanup()
		return nil, nil, "", nil, err
	}
	return pool, c, schema, cleanup, nil
}

// backlog loads -backlog tasks already due, then starts one worker and stamps
// each handler call. It returns the drain rate over the first and the last
// window of completions and over the whole drain (from worker start until
// every outcome is recorded).
func (b *bench) backlog(ctx context.Context) ([]float64, error) {
	pool, _, schema, cleanup, err := b.freshBacklog(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	m := b.backlogN
	stamps := make([]time.Time, m)
	var done atomic.Int64
	finished := make(chan struct{})
	start := time.Now()
	w, err := b.worker(ctx, pool, schema, func(*pgsched.Job) {
		i := done.Add(1) - 1
		if i < int64(m) {
			stamps[i] = time.Now()
		}
		if i == int64(m)-1 {
			close(finished)
		}
	})
	if err != nil {
		return nil, err
	}
	defer stopWorker(w)
	select {
	case <-finished:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := waitEmpty(ctx, pool, schema); err != nil {
		return nil, err
	}
	all := float64(m) / time.Since(start).Seconds()
	// Stamps are taken after an atomic increment, so neighbours may be out
	// of order by a hair; the window edges are sorted to be safe.
	slices.SortFunc(stamps, func(a, b time.Time) int { return a.Compare(b) })
	k := b.backlogWindow()
	first := float64(k-1) / stamps[k-1].Sub(stamps[0]).Seconds()
	last := float64(k-1) / stamps[m-1].Sub(stamps[m-k]).Seconds()
	return []float64{first, last, all, 100 * last / first}, nil
}

// memSample is the Go heap's allocation counters at a point in time.
type memSample struct{ mallocs, bytes uint64 }

func sampleMem() memSample {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return memSample{mallocs: m.Mallocs, bytes: m.TotalAlloc}
}

// perTask says what this process (client, worker and handlers) spent per
// task of n since the samples: CPU time, where it can be read, and heap
// allocations, which unlike throughput do not move with the machine's
// neighbours, so a change in the worker's per-task work shows at once.
func perTask(cpu cpuSample, mem memSample, n int) string {
	end := sampleMem()
	s := fmt.Sprintf("%.1f allocations, %.0f bytes", float64(end.mallocs-mem.mallocs)/float64(n), float64(end.bytes-mem.bytes)/float64(n))
	if self, ok := selfCPU(cpu); ok {
		s = fmt.Sprintf("%.2f µs CPU, %s", float64(self.Microseconds())/float64(n), s)
	}
	return s
}
