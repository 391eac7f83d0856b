// Command riverbench measures River (github.com/riverqueue/river) on the
// PostgreSQL named by DATABASE_URL, so that pgsched's cmd/bench figures can be
// read beside it: burn-down of -n pre-inserted no-op jobs at each worker count
// of -workers, and enqueue rates (single Insert, InsertMany and
// InsertManyFast). Each figure is the median of -runs runs, with min and max,
// printed in cmd/bench's table format.
//
// Every run migrates River into a fresh schema of its own and drops it
// afterwards, so runs never see each other's rows or dead tuples.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "riverbench:", err)
		os.Exit(1)
	}
}

type bench struct {
	url           string
	runs          int
	n             int
	fetchCooldown time.Duration
	fetchPoll     time.Duration
	logger        *slog.Logger
	seq           int

	sustainedDuration  time.Duration
	sustainedProducers int
	sustainedBatch     int
	sustainedWorkers   int
	sustainedBacklog   int
}

func run(ctx context.Context, args []string) error {
	b := &bench{}
	fs := flag.NewFlagSet("riverbench", flag.ContinueOnError)
	fs.IntVar(&b.runs, "runs", 3, "runs per figure (median, min, max)")
	fs.IntVar(&b.n, "n", 100_000, "jobs per burn-down and per batch-enqueue run")
	workersFlag := fs.String("workers", "100,500,2000", "comma-separated MaxWorkers values for the burn-down (100 = the handlers pgsched runs in cmd/bench; 500 = the tasks it holds, 100 running and 400 prefetched; 2000 = River's own benchmark setting)")
	// River's own benchmark (cmd/river bench) uses these two; the library's
	// defaults (100 ms, 1 s) are much slower for a burn-down.
	fs.DurationVar(&b.fetchCooldown, "fetch-cooldown", 2*time.Millisecond, "River FetchCooldown")
	fs.DurationVar(&b.fetchPoll, "fetch-poll-interval", 20*time.Millisecond, "River FetchPollInterval")
	fs.DurationVar(&b.sustainedDuration, "sustained-duration", 60*time.Second, "measured window of the sustained run (as cmd/bench's)")
	fs.IntVar(&b.sustainedBacklog, "sustained-backlog", 75_000, "jobs the sustained run keeps waiting, topped up every 250 ms in batches of -sustained-batch (River's duration mode: 75,000); 0 = -sustained-producers insert without pause (as cmd/bench's)")
	fs.IntVar(&b.sustainedProducers, "sustained-producers", 2, "concurrent producers in the sustained run with -sustained-backlog 0 (as cmd/bench's)")
	fs.IntVar(&b.sustainedBatch, "sustained-batch", 5_000, "jobs per InsertMany call in the sustained run (River's duration mode: 5,000; as cmd/bench's ScheduleMany)")
	fs.IntVar(&b.sustainedWorkers, "sustained-workers", 2000, "MaxWorkers in the sustained run (River's own benchmark setting)")
	only := fs.String("only", "", "comma-separated workloads to run (burn, enqueue, sustained); empty runs all")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var workerCounts []int
	for _, s := range strings.Split(*workersFlag, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || v <= 0 {
			return fmt.Errorf("-workers: bad value %q", s)
		}
		workerCounts = append(workerCounts, v)
	}
	if b.runs < 1 || b.n < 1 || b.sustainedProducers < 1 || b.sustainedBatch < 1 || b.sustainedWorkers < 1 || b.sustainedBacklog < 0 {
		return errors.New("-runs, -n and the -sustained- counts must be positive (-sustained-backlog may be 0)")
	}
	b.url = os.Getenv("DATABASE_URL")
	if b.url == "" {
		return errors.New("DATABASE_URL is not set")
	}
	b.logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	fmt.Fprintf(os.Stderr, "riverbench: River %s\n", riverVersion())

	type workload struct {
		name, label string
		fn          func(context.Context) (float64, error)
	}
	var all []workload
	for _, w := range workerCounts {
		all = append(all, workload{"burn", fmt.Sprintf("river burn-down %d, %d workers, jobs/s", b.n, w),
			func(ctx context.Context) (float64, error) { return b.burn(ctx, w) }})
	}
	all = append(all,
		workload{"enqueue", "river single Insert x 16 callers, jobs/s", b.enqueueSingle},
		workload{"enqueue", "river InsertMany 10k/call x 4, jobs/s", b.enqueueBatch(false)},
		workload{"enqueue", "river InsertManyFast 10k/call x 4, jobs/s", b.enqueueBatch(true)},
		workload{"sustained", fmt.Sprintf("river sustained %s: completed, jobs/s", b.sustainedDuration), b.sustained},
	)
	selected := map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			selected[s] = true
		}
	}
	fmt.Printf("%-44s %12s %12s %12s\n", "workload", "median", "min", "max")
	for _, w := range all {
		if len(selected) > 0 && !selected[w.name] {
			continue
		}
		var vals []float64
		for range b.runs {
			v, err := w.fn(ctx)
			if err != nil {
				return fmt.Errorf("%s: %w", w.label, err)
			}
			vals = append(vals, v)
		}
		slices.Sort(vals)
		fmt.Printf("%-44s %12.1f %12.1f %12.1f\n", w.label, vals[len(vals)/2], vals[0], vals[len(vals)-1])
	}
	return nil
}

// riverVersion is the River module version this binary was built with.
func riverVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == "github.com/riverqueue/river" {
				return m.Version
			}
		}
	}
	return "(unknown)"
}

// noopArgs is the job every workload inserts; its worker does nothing.
type noopArgs struct {
	Num int `json:"num"`
}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	done func()
}

func (w *noopWorker) Work(context.Context, *river.Job[noopArgs]) error {
	w.done()
	return nil
}

// env is one run's fresh River schema, pool and client.
type env struct {
	schema string
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx]
}

// fresh migrates River into a new schema and returns a client on it whose
// worker calls done per job. maxWorkers 0 makes an insert-only client.
func (b *bench) fresh(ctx context.Context, maxWorkers int, done func()) (*env, func(), error) {
	b.seq++
	schema := fmt.Sprintf("riverbench_%d_%d", os.Getpid(), b.seq)
	cfg, err := pgxpool.ParseConfig(b.url)
	if err != nil {
		return nil, nil, err
	}
	// River's executors and the completer share this pool; fetches take one
	// connection per queue, so 50 (what cmd/bench gives pgsched) is plenty.
	cfg.MaxConns = 50
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		pool.Close()
	}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("creating schema: %w", err)
	}
	driver := riverpgxv5.New(pool)
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema, Logger: b.logger})
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("migrating River: %w", err)
	}
	workers := river.NewWorkers()
	if done == nil {
		done = func() {}
	}
	river.AddWorker(workers, &noopWorker{done: done})
	rc := &river.Config{
		Schema:            schema,
		Logger:            b.logger,
		Workers:           workers,
		FetchCooldown:     b.fetchCooldown,
		FetchPollInterval: b.fetchPoll,
	}
	if maxWorkers > 0 {
		rc.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}}
	}
	client, err := river.NewClient(driver, rc)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return &env{schema: schema, pool: pool, client: client}, cleanup, nil
}

func params(n, from int, opts *river.InsertOpts) []river.InsertManyParams {
	ps := make([]river.InsertManyParams, n)
	for i := range ps {
		ps[i] = river.InsertManyParams{Args: noopArgs{Num: from + i}, InsertOpts: opts}
	}
	return ps
}

// burn inserts b.n available jobs, starts a client with maxWorkers workers
// and measures until every job is worked and recorded completed.
func (b *bench) burn(ctx context.Context, maxWorkers int) (float64, error) {
	var worked atomic.Int64
	finished := make(chan struct{})
	n := int64(b.n)
	e, cleanup, err := b.fresh(ctx, maxWorkers, func() {
		if worked.Add(1) == n {
			close(finished)
		}
	})
	if err != nil {
		return 0, err
	}
	defer cleanup()
	// The backlog is there before the client starts, as in River's own
	// burn-down benchmark (5,000 per InsertMany there; InsertManyFast here,
	// which only changes how long the setup takes). No ANALYZE, as for
	// pgsched's burn-down in cmd/bench.
	const batch = 5_000
	for from := 0; from < b.n; from += batch {
		if _, err := e.client.InsertManyFast(ctx, params(min(batch, b.n-from), from, nil)); err != nil {
			return 0, fmt.Errorf("inserting jobs: %w", err)
		}
	}
	start := time.Now()
	if err := e.client.Start(ctx); err != nil {
		return 0, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = e.client.Stop(stopCtx)
	}()
	select {
	case <-finished:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	// Like cmd/bench for pgsched: the clock stops when every outcome is
	// written, not when the last handler returns.
	for {
		var left bool
		err := e.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+e.schema+".river_job WHERE state <> 'completed')").Scan(&left)
		if err != nil {
			return 0, err
		}
		if !left {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return float64(b.n) / time.Since(start).Seconds(), nil
}

// enqueueSingle mirrors cmd/bench's single-Schedule figure: 20,000 jobs,
// one Insert each, from 16 goroutines, scheduled an hour ahead.
func (b *bench) enqueueSingle(ctx context.Context) (float64, error) {
	e, cleanup, err := b.fresh(ctx, 0, nil)
	if err != nil {
		return 0, err
	}
	defer cleanup()
	const n, callers = 20_000, 16
	opts := &river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, callers)
	start := time.Now()
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > n {
					return
				}
				if _, err := e.client.Insert(ctx, noopArgs{Num: int(i)}, opts); err != nil {
					errs[c] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return n / time.Since(start).Seconds(), nil
}

// enqueueBatch mirrors cmd/bench's ScheduleMany figure: b.n jobs from four
// callers at once in 10,000-job calls, scheduled an hour ahead. fast selects
// InsertManyFast (COPY, no rows back) over InsertMany (rows back, as
// ScheduleMany returns a result per task).
func (b *bench) enqueueBatch(fast bool) func(context.Context) (float64, error) {
	return func(ctx context.Context) (float64, error) {
		e, cleanup, err := b.fresh(ctx, 0, nil)
		if err != nil {
			return 0, err
		}
		defer cleanup()
		const callers, batch = 4, 10_000
		opts := &river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)}
		var wg sync.WaitGroup
		errs := make([]error, callers)
		start := time.Now()
		for c := range callers {
			lo, hi := c*b.n/callers, (c+1)*b.n/callers
			wg.Add(1)
			go func() {
				defer wg.Done()
				for from := lo; from < hi; from += batch {
					ps := params(min(batch, hi-from), from, opts)
					var err error
					if fast {
						_, err = e.client.InsertManyFast(ctx, ps)
					} else {
						_, err = e.client.InsertMany(ctx, ps)
					}
					if err != nil {
						errs[c] = err
						return
					}
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return 0, err
		}
		return float64(b.n) / time.Since(start).Seconds(), nil
	}
}

// sustained works jobs for -sustained-duration with -sustained-workers
// while jobs keep arriving: as River's duration mode (cmd/river bench
// -duration) does, a producer keeps -sustained-backlog jobs waiting,
// inserting -sustained-batch at a time with InsertMany whenever fewer are
// left, looking every 250 ms; with -sustained-backlog 0,
// -sustained-producers insert without pause (as cmd/bench's). The window
// starts once the first backlog is in. It returns completed jobs/s.
func (b *bench) sustained(ctx context.Context) (float64, error) {
	var worked, inserted atomic.Int64
	e, cleanup, err := b.fresh(ctx, b.sustainedWorkers, func() { worked.Add(1) })
	if err != nil {
		return 0, err
	}
	defer cleanup()
	if err := e.client.Start(ctx); err != nil {
		return 0, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = e.client.Stop(stopCtx)
	}()
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errs := make([]error, b.sustainedProducers)
	insert := func(seq int) error {
		if _, err := e.client.InsertMany(pctx, params(b.sustainedBatch, seq, nil)); err != nil {
			if pctx.Err() != nil {
				return pctx.Err()
			}
			return err
		}
		inserted.Add(int64(b.sustainedBatch))
		return nil
	}
	ready := make(chan struct{})
	if b.sustainedBacklog > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[0] = topUp(pctx, ready, b.sustainedBacklog, func() int64 { return inserted.Load() - worked.Load() },
				func(batch int) error { return insert(batch * b.sustainedBatch) })
		}()
	} else {
		close(ready)
		for p := range b.sustainedProducers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for seq := 0; pctx.Err() == nil; seq += b.sustainedBatch {
					if err := insert(seq); err != nil {
						errs[p] = err
						return
					}
				}
			}()
		}
	}
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-ready:
	}
	start, worked0, inserted0 := time.Now(), worked.Load(), inserted.Load()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(b.sustainedDuration):
	}
	done, added := worked.Load()-worked0, inserted.Load()-inserted0
	elapsed := time.Since(start).Seconds()
	stop()
	wg.Wait()
	for i, err := range errs {
		if errors.Is(err, context.Canceled) {
			errs[i] = nil // the producers were stopped
		}
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	fmt.Fprintf(os.Stderr, "river sustained %s, %d workers: %.0f completed/s while %.0f/s were inserted; %d left\n",
		b.sustainedDuration, b.sustainedWorkers, float64(done)/elapsed, float64(added)/elapsed, inserted.Load()-worked.Load())
	return float64(done) / elapsed, nil
}

// topUp keeps at least backlog jobs waiting (left says how many are), as
// River's duration mode does: every 250 ms, while fewer are left, it calls
// insert (with a batch number counting from 0) until there are. It closes
// ready once the first backlog is in, or when it returns: on a failed
// insert, or with ctx's error once ctx is done.
func topUp(ctx context.Context, ready chan<- struct{}, backlog int, left func() int64, insert func(int) error) error {
	var once sync.Once
	defer once.Do(func() { close(ready) })
	for batch := 0; ; {
		for left() < int64(backlog) {
			if err := insert(batch); err != nil {
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
