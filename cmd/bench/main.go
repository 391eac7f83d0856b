// Command bench measures pgsched on one PostgreSQL and prints a table:
// enqueue rates (single and batch), burn-down throughput (own ordering_id per
// task, and 1,000 ordering_ids x 100 in order) and start lateness at a steady
// rate. Each figure is the median of -runs runs, with min and max.
//
// With no DATABASE_URL it starts a private, durable (fsync on) PostgreSQL in
// a temporary directory, like shared/anchors/pg-up.sh.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/localpg"
	"github.com/pgsched/pgsched/internal/migrator"
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
	url      string
	runs     int
	n        int
	conc     int
	rate     int
	duration time.Duration
	seq      int
}

func run(ctx context.Context) error {
	b := &bench{}
	flag.IntVar(&b.runs, "runs", 3, "runs per figure (median, min, max)")
	flag.IntVar(&b.n, "n", 100_000, "tasks per burn-down")
	flag.IntVar(&b.conc, "concurrency", 100, "worker concurrency")
	flag.IntVar(&b.rate, "rate", 2000, "tasks/s for the lateness run")
	flag.DurationVar(&b.duration, "lateness-duration", 10*time.Second, "length of the lateness run")
	only := flag.String("only", "", "run only this workload (enqueue, burn-own, burn-ordered, lateness)")
	flag.Parse()

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
		fmt.Printf("PostgreSQL: private durable server at %s\n", b.url)
	}
	fmt.Printf("%-44s %12s %12s %12s\n", "workload", "median", "min", "max")
	type workload struct {
		name, unit string
		fn         func(context.Context) (float64, error)
	}
	all := []workload{
		{"enqueue", "single Schedule, tasks/s", b.enqueueSingle},
		{"enqueue", "ScheduleMany 10k/call x 4 callers, tasks/s", b.enqueueBatch},
		{"burn-own", fmt.Sprintf("burn-down %d, own ordering_id, tasks/s", b.n), b.burnOwn},
		{"burn-ordered", fmt.Sprintf("burn-down 1000 ids x %d, in order, tasks/s", b.n/1000), b.burnOrdered},
		{"lateness", fmt.Sprintf("lateness p50 at %d/s, ms", b.rate), b.latenessP(50)},
		{"lateness", fmt.Sprintf("lateness p99 at %d/s, ms", b.rate), b.latenessP(99)},
	}
	for _, w := range all {
		if *only != "" && *only != w.name {
			continue
		}
		var vals []float64
		for range b.runs {
			v, err := w.fn(ctx)
			if err != nil {
				return fmt.Errorf("%s: %w", w.unit, err)
			}
			vals = append(vals, v)
		}
		slices.Sort(vals)
		fmt.Printf("%-44s %12.1f %12.1f %12.1f\n", w.unit, vals[len(vals)/2], vals[0], vals[len(vals)-1])
	}
	return nil
}

// fresh migrates a new schema and returns a pool and client on it.
func (b *bench) fresh(ctx context.Context) (*pgxpool.Pool, *pgsched.Client, string, func(), error) {
	b.seq++
	schema := fmt.Sprintf("bench_%d_%d", os.Getpid(), b.seq)
	if err := migrator.Up(ctx, b.url, migrator.Options{Schema: schema}); err != nil {
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
	c, err := pgsched.NewClient(pool, pgsched.Config{Schema: schema})
	if err != nil {
		return nil, nil, "", nil, err
	}
	cleanup := func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		pool.Close()
	}
	return pool, c, schema, cleanup, nil
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

func enqueueAll(ctx context.Context, c *pgsched.Client, tasks []pgsched.Task) error {
	for len(tasks) > 0 {
		k := min(len(tasks), batchSize)
		if _, err := c.ScheduleMany(ctx, tasks[:k]); err != nil {
			return err
		}
		tasks = tasks[k:]
	}
	return nil
}

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
		go func() { defer wg.Done(); errs[i] = enqueueAll(ctx, c, part) }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return float64(len(tasks)) / time.Since(start).Seconds(), nil
}

func (b *bench) burn(ctx context.Context, ids int) (float64, error) {
	pool, c, schema, cleanup, err := b.fresh(ctx)
	if err != nil {
		return 0, err
	}
	defer cleanup()
	// Due now (within the grace window): the backlog is there before the
	// worker starts, as in the peers' burn-down benchmarks.
	if err := enqueueAll(ctx, c, tasksFor(b.n, ids, time.Now().Add(-time.Second))); err != nil {
		return 0, err
	}
	var done atomic.Int64
	finished := make(chan struct{})
	w, err := pgsched.NewWorker(pool, pgsched.Config{
		Schema: schema, Concurrency: b.conc, Logger: slog.New(slog.DiscardHandler),
		Handlers: map[string]pgsched.Handler{"*": pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error {
			if done.Add(1) == int64(b.n) {
				close(finished)
			}
			return nil
		})},
	})
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := w.Start(ctx); err != nil {
		return 0, err
	}
	defer func() { _ = w.Stop(context.Background()) }()
	<-finished
	// Wait until every outcome is recorded too.
	for {
		var left int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".tasks").Scan(&left); err != nil {
			return 0, err
		}
		if left == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return float64(b.n) / time.Since(start).Seconds(), nil
}

func (b *bench) burnOwn(ctx context.Context) (float64, error)     { return b.burn(ctx, 0) }
func (b *bench) burnOrdered(ctx context.Context) (float64, error) { return b.burn(ctx, 1000) }

func (b *bench) latenessP(p int) func(context.Context) (float64, error) {
	return func(ctx context.Context) (float64, error) {
		lat, err := b.lateness(ctx)
		if err != nil {
			return 0, err
		}
		slices.Sort(lat)
		return lat[len(lat)*p/100].Seconds() * 1000, nil
	}
}

// lateness enqueues tasks due "now" at a steady rate and measures, in the
// handler, how late each started.
func (b *bench) lateness(ctx context.Context) ([]time.Duration, error) {
	pool, c, schema, cleanup, err := b.fresh(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	var mu sync.Mutex
	var lat []time.Duration
	w, err := pgsched.NewWorker(pool, pgsched.Config{
		Schema: schema, Concurrency: b.conc, Logger: slog.New(slog.DiscardHandler),
		Handlers: map[string]pgsched.Handler{"*": pgsched.HandlerFunc(func(_ context.Context, j *pgsched.Job) error {
			d := time.Since(j.ScheduledAt)
			mu.Lock()
			lat = append(lat, d)
			mu.Unlock()
			return nil
		})},
	})
	if err != nil {
		return nil, err
	}
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop(context.Background()) }()
	// Enqueue in 10 ms ticks of rate/100 tasks, scheduled 50 ms ahead so
	// the measure is the scheduler's, not the enqueue's, latency.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	per := b.rate / 100
	total := 0
	end := time.Now().Add(b.duration)
	for time.Now().Before(end) {
		<-tick.C
		at := time.Now().Add(50 * time.Millisecond)
		tasks := make([]pgsched.Task, per)
		for i := range tasks {
			tasks[i] = pgsched.Task{OrderingID: fmt.Sprint("l", total+i), ScheduledAt: at}
		}
		total += per
		if _, err := c.ScheduleMany(ctx, tasks); err != nil {
			return nil, err
		}
	}
	for {
		mu.Lock()
		n := len(lat)
		mu.Unlock()
		if n >= total {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return lat, nil
}
