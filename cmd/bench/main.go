// Command bench measures pgsched on one PostgreSQL and prints a table:
//
//   - enqueue: single Schedule and batched ScheduleMany rates;
//   - burn-own, burn-ordered: burn-down of -n due tasks (own ordering_id per
//     task, and 1,000 ordering_ids in order); on stderr, how the machine's
//     CPU was shared during each run (this process, the rest, idle);
//   - lateness: start lateness of tasks arriving at a steady -rate;
//   - sustained (c): producers enqueue due tasks without pause for
//     -sustained-duration while one worker runs them; completed and enqueued
//     tasks/s over the window and the backlog left at its end;
//   - backlog (e): -backlog tasks already due, drained by one worker; drain
//     rate over the first and the last 100k completions, from the handler's
//     clock;
//   - claim-latency (g): with -claim-pending tasks pending but not due (an
//     hour ahead), one due task at a time; p50/p99 of the worker's claim
//     path for it (due partitions read, then the claim) for each size, and
//     their ratio.
//
// Each figure is the median of -runs runs, with min and max; every run uses a
// freshly migrated schema. -only picks workloads by name (comma-separated).
//
// With no DATABASE_URL it starts a private, durable (fsync on) PostgreSQL in
// a temporary directory, like shared/anchors/pg-up.sh.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/localpg"
	"github.com/pgsched/pgsched/internal/migrator"
	"github.com/pgsched/pgsched/internal/store"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type bench struct {
	partitions      int
	tablePartitions int
	url             string
	runs            int
	n               int
	conc            int
	prefetch        int
	rate            int
	duration        time.Duration
	seq             int

	sustainedDuration  time.Duration
	sustainedProducers int
	sustainedBatch     int
	sustainedRate      int

	backlogN int

	claimPending  []int
	tombstones    []int
	claimDuration time.Duration
}

// workload is one or more table rows measured by the same runs.
type workload struct {
	names  []string // what -only selects it by
	labels []string // one row per value fn returns
	fn     func(context.Context) ([]float64, error)
}

func run(ctx context.Context) error {
	b := &bench{}
	flag.IntVar(&b.runs, "runs", 3, "runs per figure (median, min, max)")
	flag.IntVar(&b.n, "n", 100_000, "tasks per burn-down and per batch-enqueue run")
	flag.IntVar(&b.conc, "concurrency", 100, "worker concurrency")
	// 400 with concurrency 100: the worker holds up to 500 claimed tasks, as
	// graphile-worker does with the local queue of 500 bench.sh gives it.
	flag.IntVar(&b.prefetch, "prefetch", 400, "claimed tasks a worker may hold beyond its concurrency (0: the worker's default, equal to concurrency; negative: none)")
	flag.IntVar(&b.partitions, "partitions", 64, "logical partitions of each benchmark schema")
	flag.IntVar(&b.tablePartitions, "table-partitions", 0, "physical partitions of heads and backlog (0: migrator default)")
	flag.IntVar(&b.rate, "rate", 2000, "tasks/s for the lateness run")
	flag.DurationVar(&b.duration, "lateness-duration", 10*time.Second, "length of the lateness run")
	flag.DurationVar(&b.sustainedDuration, "sustained-duration", 60*time.Second, "measured window of the sustained run")
	flag.IntVar(&b.sustainedProducers, "sustained-producers", 2, "concurrent producers in the sustained run")
	flag.IntVar(&b.sustainedBatch, "sustained-batch", 500, "tasks per ScheduleMany call in the sustained run")
	flag.IntVar(&b.sustainedRate, "sustained-rate", 0, "total enqueue rate cap in tasks/s for the sustained run; 0 = as fast as the producers go")
	flag.IntVar(&b.backlogN, "backlog", 1_000_000, "tasks due in the past for the backlog drain")
	claimPending := flag.String("claim-pending", "10000,1000000", "comma-separated not-due backlog sizes for claim latency; the ratio compares the last to the first")
	flag.DurationVar(&b.claimDuration, "claim-duration", 10*time.Second, "length of each claim-latency run")
	tombstones := flag.String("tombstones", "0,100000000", "comma-separated counts of completion records present for the tombstones workload; the ratios compare the last to the first")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run (Go side) to this file")
	only := flag.String("only", "", "comma-separated workloads: enqueue, burn-own, burn-ordered, lateness, sustained (c), backlog (e), tombstones (f), claim-latency (g); empty runs all")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	for _, s := range strings.Split(*claimPending, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || v < 0 {
			return fmt.Errorf("-claim-pending: bad size %q", s)
		}
		b.claimPending = append(b.claimPending, v)
	}
	for _, s := range strings.Split(*tombstones, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || v < 0 {
			return fmt.Errorf("-tombstones: bad count %q", s)
		}
		b.tombstones = append(b.tombstones, v)
	}
	switch {
	case b.runs < 1, b.n < 1, b.conc < 1:
		return errors.New("-runs, -n and -concurrency must be positive")
	case b.rate < 100:
		return errors.New("-rate must be at least 100")
	case b.backlogN < 2:
		return errors.New("-backlog must be at least 2")
	case b.sustainedProducers < 1, b.sustainedBatch < 1:
		return errors.New("-sustained-producers and -sustained-batch must be positive")
	}

	selected := map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			selected[s] = true
		}
	}
	all := b.workloads()
	known := map[string]bool{}
	for _, w := range all {
		for _, n := range w.names {
			known[n] = true
		}
	}
	for s := range selected {
		if !known[s] {
			return fmt.Errorf("-only: unknown workload %q", s)
		}
	}

	b.url = os.Getenv("DATABASE_URL")
	if b.url == "" {
		dir, err := os.MkdirTemp("", "pgsched-bench-")
		if err != nil {
			return err
		}
		_ = os.Chmod(dir, 0o755)
		defer os.RemoveAll(dir)
		srv, err := localpg.Start(ctx, localpg.Options{DataDir: dir + "/data", Durable: true})
		if err != nil {
			return err
		}
		defer func() { _ = srv.Stop(context.Background()) }()
		b.url = srv.URL()
		fmt.Fprintf(os.Stderr, "PostgreSQL: private durable server at %s\n", b.url)
	}

	fmt.Fprintf(os.Stderr, "pgsched: concurrency %d, prefetch %d, %d logical partitions, table partitions %d (0: default), %d runs\n",
		b.conc, b.prefetch, b.partitions, b.tablePartitions, b.runs)
	fmt.Printf("%-44s %12s %12s %12s\n", "workload", "median", "min", "max")
	for _, w := range all {
		if len(selected) > 0 && !slices.ContainsFunc(w.names, func(n string) bool { return selected[n] }) {
			continue
		}
		vals := make([][]float64, len(w.labels))
		for range b.runs {
			vs, err := w.fn(ctx)
			if err != nil {
				return fmt.Errorf("%s: %w", w.labels[0], err)
			}
			for i, v := range vs {
				vals[i] = append(vals[i], v)
			}
		}
		for i, label := range w.labels {
			v := vals[i]
			slices.Sort(v)
			fmt.Printf("%-44s %12.1f %12.1f %12.1f\n", label, v[len(v)/2], v[0], v[len(v)-1])
		}
	}
	return nil
}

func (b *bench) workloads() []workload {
	one := func(f func(context.Context) (float64, error)) func(context.Context) ([]float64, error) {
		return func(ctx context.Context) ([]float64, error) {
			v, err := f(ctx)
			return []float64{v}, err
		}
	}
	all := []workload{
		{[]string{"enqueue"}, []string{"single Schedule, tasks/s"}, one(b.enqueueSingle)},
		{[]string{"enqueue"}, []string{"ScheduleMany 10k/call x 4 callers, tasks/s"}, one(b.enqueueBatch)},
		{[]string{"burn-own"}, []string{fmt.Sprintf("burn-down %d, own ordering_id, tasks/s", b.n)}, one(b.burnOwn)},
		{[]string{"burn-ordered"}, []string{fmt.Sprintf("burn-down 1000 ids x %d, in order, tasks/s", b.n/1000)}, one(b.burnOrdered)},
		{[]string{"lateness"}, []string{
			fmt.Sprintf("lateness p50 at %d/s, ms", b.rate),
			fmt.Sprintf("lateness p99 at %d/s, ms", b.rate),
		}, b.latenessRun},
		{[]string{"sustained", "c"}, []string{
			fmt.Sprintf("sustained %s: completed, tasks/s", b.sustainedDuration),
			fmt.Sprintf("sustained %s: enqueued, tasks/s", b.sustainedDuration),
			fmt.Sprintf("sustained %s: backlog at end, tasks", b.sustainedDuration),
		}, b.sustained},
	}
	k := b.backlogWindow()
	all = append(all, workload{[]string{"backlog", "e"}, []string{
		fmt.Sprintf("backlog %s: drain first %s, tasks/s", short(b.backlogN), short(k)),
		fmt.Sprintf("backlog %s: drain last %s, tasks/s", short(b.backlogN), short(k)),
		fmt.Sprintf("backlog %s: drain all, tasks/s", short(b.backlogN)),
		// Each run's own ratio: the machine's speed drifts between runs,
		// so the ratio of the medians mixes runs.
		fmt.Sprintf("backlog %s: last / first %s, %% per run", short(b.backlogN), short(k)),
	}, b.backlog})
	var claim []string
	for _, p := range b.claimPending {
		claim = append(claim,
			fmt.Sprintf("claim p50, %s not due, ms", short(p)),
			fmt.Sprintf("claim p99, %s not due, ms", short(p)))
	}
	if len(b.claimPending) > 1 {
		first, last := short(b.claimPending[0]), short(b.claimPending[len(b.claimPending)-1])
		claim = append(claim,
			fmt.Sprintf("claim p50 ratio %s/%s", last, first),
			fmt.Sprintf("claim p99 ratio %s/%s", last, first))
	}
	all = append(all, b.tombstoneWorkload())
	return append(all, workload{[]string{"claim-latency", "g"}, claim, b.claimLatency})
}

// short writes 10000 as 10k and 1000000 as 1M.
func short(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1_000 && n%1_000 == 0:
		return fmt.Sprintf("%dk", n/1_000)
	}
	return strconv.Itoa(n)
}

// fresh migrates a new schema and returns a pool and client on it.
func (b *bench) fresh(ctx context.Context) (*pgxpool.Pool, *pgsched.Client, string, func(), error) {
	b.seq++
	schema := fmt.Sprintf("bench_%d_%d", os.Getpid(), b.seq)
	if err := migrator.Up(ctx, b.url, migrator.Options{Schema: schema, Partitions: b.partitions, TablePartitions: b.tablePartitions}); err != nil {
		return nil, nil, "", nil, err
	}
	cfg, err := pgxpool.ParseConfig(b.url)
	if err != nil {
		return nil, nil, "", nil, err
	}
	cfg.MaxConns = 50
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, "", nil, err
	}
	c, err := pgsched.NewClient(pool, pgsched.ClientConfig{Schema: schema})
	if err != nil {
		return nil, nil, "", nil, err
	}
	cleanup := func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		pool.Close()
	}
	return pool, c, schema, cleanup, nil
}

// worker starts a pgsched worker on schema whose handler for every kind is h.
func (b *bench) worker(ctx context.Context, pool *pgxpool.Pool, schema string, h func(*pgsched.Job)) (*pgsched.Worker, error) {
	w, err := pgsched.NewWorker(pool, pgsched.WorkerConfig{
		Schema: schema, Concurrency: b.conc, Prefetch: b.prefetch, Logger: slog.New(slog.DiscardHandler),
		Handlers: map[string]pgsched.Handler{"*": pgsched.HandlerFunc(func(_ context.Context, j *pgsched.Job) error {
			h(j)
			return nil
		})},
	})
	if err != nil {
		return nil, err
	}
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

func stopWorker(w *pgsched.Worker) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = w.Stop(ctx)
}

// waitEmpty waits until the schema's tasks table is empty: every outcome is
// recorded, not only every handler returned.
func waitEmpty(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	for {
		var left bool
		if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+schema+".tasks)").Scan(&left); err != nil {
			return err
		}
		if !left {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// analyze refreshes planner statistics of every table in schema, as
// autovacuum would soon after a bulk load.
func analyze(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	_, err := pool.Exec(ctx, "ANALYZE "+schema+".heads, "+schema+".backlog")
	return err
}

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
				at := clk.next(time.Now().Add(offset), hi-lo)
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

func (b *bench) burn(ctx context.Context, ids int) (float64, error) {
	pool, c, schema, cleanup, err := b.fresh(ctx)
	if err != nil {
		return 0, err
	}
	defer cleanup()
	// Due now (within the grace window): the backlog is there before the
	// worker starts, as in the peers' burn-down benchmarks.
	if err := enqueueLoad(ctx, c, b.n, ids, -time.Second); err != nil {
		return 0, err
	}
	var done atomic.Int64
	finished := make(chan struct{})
	start := time.Now()
	cpu := sampleCPU()
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
	rate := float64(b.n) / time.Since(start).Seconds()
	if s := cpuSplit(cpu); s != "" {
		what := "own ordering_id"
		if ids > 0 {
			what = fmt.Sprintf("%d ordering_ids", ids)
		}
		fmt.Fprintf(os.Stderr, "burn-down, %s: %.0f tasks/s; %s\n", what, rate, s)
	}
	return rate, nil
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

// sustained runs producers that enqueue due tasks without pause (or at
// -sustained-rate) while one worker runs them. It returns completed and
// enqueued tasks/s over the window and the tasks pending or running at its
// end.
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
	start := time.Now()
	for p := range b.sustainedProducers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seq := 0
			for pctx.Err() == nil {
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
				at := time.Now()
				tasks := make([]pgsched.Task, b.sustainedBatch)
				for i := range tasks {
					tasks[i] = pgsched.Task{OrderingID: fmt.Sprintf("p%d-%d", p, seq+i), ScheduledAt: at}
				}
				if _, err := c.ScheduleMany(pctx, tasks); err != nil {
					if pctx.Err() == nil {
						errs[p] = err
					}
					return
				}
				seq += len(tasks)
				enqueued.Add(int64(len(tasks)))
			}
		}()
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(b.sustainedDuration):
	}
	completed, added := done.Load(), enqueued.Load()
	elapsed := time.Since(start).Seconds()
	stopProducers()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var backlog int64
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".tasks").Scan(&backlog); err != nil {
		return nil, err
	}
	return []float64{float64(completed) / elapsed, float64(added) / elapsed, float64(backlog)}, nil
}

// backlogWindow is how many completions the first and last drain rates span:
// 100k, or half the backlog when it is smaller than 200k.
func (b *bench) backlogWindow() int { return min(100_000, b.backlogN/2) }

// backlog loads -backlog tasks already due, then starts one worker and stamps
// each handler call. It returns the drain rate over the first and the last
// window of completions and over the whole drain (from worker start until
// every outcome is recorded).
func (b *bench) backlog(ctx context.Context) ([]float64, error) {
	pool, c, schema, cleanup, err := b.fresh(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	m := b.backlogN
	if err := enqueueLoad(ctx, c, m, 0, -time.Second); err != nil {
		return nil, err
	}
	if err := analyze(ctx, pool, schema); err != nil {
		return nil, err
	}
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

// claimLatency measures, for each -claim-pending size, how long a node's
// claim path takes (the read of its due partitions, then the claim from
// them) for one due task while that many tasks wait an hour ahead. Values:
// p50 and p99 per size, then the last size's over the first's.
func (b *bench) claimLatency(ctx context.Context) ([]float64, error) {
	var out []float64
	for _, pending := range b.claimPending {
		lat, err := b.claimRun(ctx, pending)
		if err != nil {
			return nil, fmt.Errorf("%d pending: %w", pending, err)
		}
		out = append(out, percentiles(lat, 50, 99)...)
	}
	if n := len(b.claimPending); n > 1 {
		out = append(out, out[2*(n-1)]/out[0], out[2*(n-1)+1]/out[1])
	}
	return out, nil
}

// claimRun enqueues one due task at a time and times the claim path a
// worker's loop runs for it (store.NextDue over the node's partitions, then
// store.Claim from those due), as many times as fit in -claim-duration;
// each task is then finished, untimed, so the table stays as loaded. The
// claim statements are the worker's own; timing them directly keeps the
// figure about the claim, where a start lateness would mostly measure the
// worker's timers (tasks are claimed ahead of their time).
func (b *bench) claimRun(ctx context.Context, pending int) ([]time.Duration, error) {
	pool, c, schema, cleanup, err := b.fresh(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if err := enqueueLoad(ctx, c, pending, 0, time.Hour); err != nil {
		return nil, err
	}
	// Tasks pending for a while have been vacuumed and written out.
	if _, err := pool.Exec(ctx, "VACUUM (ANALYZE) "+schema+".heads, "+schema+".backlog"); err != nil {
		return nil, err
	}
	_, _ = pool.Exec(ctx, "CHECKPOINT")
	st, err := store.New(schema)
	if err != nil {
		return nil, err
	}
	set, err := st.Settings(ctx, pool)
	if err != nil {
		return nil, err
	}
	parts := make([]int32, set.PartitionCount)
	for i := range parts {
		parts[i] = int32(i)
	}
	const node = "bench-claim"
	lease, err := st.NodeRegister(ctx, pool, node, time.Hour, "bench", os.Getpid(), false)
	if err != nil {
		return nil, err
	}
	var lat []time.Duration
	deadline := time.Now().Add(b.claimDuration)
	for i := 0; time.Now().Before(deadline); i++ {
		if _, err := c.Schedule(ctx, pgsched.Task{OrderingID: fmt.Sprint("d", i), ScheduledAt: time.Now()}); err != nil {
			return nil, err
		}
		start := time.Now()
		next, err := st.NextDue(ctx, pool, parts)
		if err != nil {
			return nil, err
		}
		var due []int32
		for _, p := range next {
			if p.DueIn <= 0 {
				due = append(due, int32(p.Partition))
			}
		}
		jobs, err := st.Claim(ctx, pool, node, lease.Epoch, due, 1, 0)
		lat = append(lat, time.Since(start))
		if err != nil {
			return nil, err
		}
		if len(jobs) != 1 {
			return nil, fmt.Errorf("claim %d took %d tasks, want the one due", i, len(jobs))
		}
		j := jobs[0]
		if _, err := st.Finish(ctx, pool, node, lease.Epoch, []store.Outcome{{
			Partition: j.Partition, OrderingID: j.OrderingID, ID: j.ID, ClaimedAt: j.ClaimedAt, Outcome: store.OutcomeCompleted,
		}}, store.Handover{}); err != nil {
			return nil, err
		}
	}
	if len(lat) < 100 {
		return nil, fmt.Errorf("only %d claims in %s: -claim-duration too short", len(lat), b.claimDuration)
	}
	return lat, nil
}
