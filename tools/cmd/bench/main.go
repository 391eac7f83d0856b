// Command bench measures pgsched on one PostgreSQL and prints a table:
//
//   - enqueue: single Schedule and batched ScheduleMany rates;
//   - burn-own, burn-ordered: burn-down of -n due tasks (own ordering_id per
//     task, and 1,000 ordering_ids in order); on stderr, how the machine's
//     CPU was shared during each run (this process, the rest, idle);
//   - burn-traced: the own-ordering_id burn-down untraced and with
//     OpenTelemetry tracing on (pgschedotel), back to back, and the ratio;
//   - lateness: start lateness of tasks arriving at a steady -rate;
//   - sustained (c): for -sustained-duration one worker runs due tasks
//     while a producer keeps -sustained-backlog of them waiting, as River's
//     duration mode does (or, with -sustained-backlog 0, producers enqueue
//     without pause); completed and enqueued tasks/s over the window and
//     the backlog left at its end;
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
// With -citus every schema is distributed (migrate -citus) on the Citus
// coordinator DATABASE_URL names.
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
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
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
	partitions      int
	tablePartitions int
	citus           bool
	url             string
	runs            int
	n               int
	conc            int
	prefetch        int
	rate            int
	duration        time.Duration
	limitedMax      int
	priorityRate    int
	limitedRate     int
	limitedHold     time.Duration
	seq             int

	sustainedDuration  time.Duration
	sustainedProducers int
	sustainedBatch     int
	sustainedRate      int
	sustainedBacklog   int

	backlogN int

	claimPending  []int
	tombstones    []int
	schedules     int
	consoleTasks  int
	claimDuration time.Duration

	replicaCounts []int
	phase         time.Duration // rebalance: length of each phase
	leaseTTL      time.Duration // worker LeaseTTL (0: the worker's default)
	flexDown      time.Duration // worker FlexDown (0: the worker's default)
	reportStarts  bool          // replica child: print each task's start
	tracing       *tracing      // burn-traced: clients and workers trace
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
	flag.BoolVar(&b.citus, "citus", false, "migrate each schema with -citus: DATABASE_URL is a Citus coordinator")
	flag.IntVar(&b.tablePartitions, "table-partitions", 0, "physical partitions of heads and backlog (0: migrator default)")
	flag.IntVar(&b.rate, "rate", 2000, "tasks/s for the lateness run")
	flag.DurationVar(&b.duration, "lateness-duration", 10*time.Second, "length of the lateness run (and of the limited run's enqueueing)")
	flag.IntVar(&b.priorityRate, "priority-rate", 200, "tasks/s of priority 10 enqueued while the priority workload's backlog drains")
	flag.IntVar(&b.limitedMax, "limited-max", 50, "max_running of the limited workload's kind")
	flag.IntVar(&b.limitedRate, "limited-rate", 5000, "tasks/s enqueued in the limited workload")
	flag.DurationVar(&b.limitedHold, "limited-hold", 5*time.Millisecond, "how long each limited task's handler takes")
	flag.DurationVar(&b.sustainedDuration, "sustained-duration", 60*time.Second, "measured window of the sustained run")
	flag.IntVar(&b.sustainedBacklog, "sustained-backlog", 75_000, "tasks the sustained run keeps waiting, topped up every 250 ms in batches of -sustained-batch (River's duration mode: 75,000); 0 = -sustained-producers enqueue without pause")
	flag.IntVar(&b.sustainedProducers, "sustained-producers", 2, "concurrent producers in the sustained run with -sustained-backlog 0")
	flag.IntVar(&b.sustainedBatch, "sustained-batch", 5_000, "tasks per ScheduleMany call in the sustained run (River's duration mode: 5,000)")
	flag.IntVar(&b.sustainedRate, "sustained-rate", 0, "with -sustained-backlog 0, total enqueue rate cap in tasks/s; 0 = as fast as the producers go")
	flag.IntVar(&b.backlogN, "backlog", 1_000_000, "tasks due in the past for the backlog drain")
	claimPending := flag.String("claim-pending", "10000,1000000", "comma-separated not-due backlog sizes for claim latency; the ratio compares the last to the first")
	flag.DurationVar(&b.claimDuration, "claim-duration", 10*time.Second, "length of each claim-latency run")
	flag.IntVar(&b.schedules, "schedules", 10_000, "recurring schedules, each ticking once a minute, for the recurring workload")
	flag.IntVar(&b.consoleTasks, "console-tasks", 1_000_000, "pending tasks, and as many dead ones, for the console workload (a multiple of 10)")
	tombstones := flag.String("tombstones", "0,100000000", "comma-separated counts of completion records present for the tombstones workload; the ratios compare the last to the first")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run (Go side) to this file")
	replicaCounts := flag.String("replicas", "1,2,4", "comma-separated worker process counts for the replicas workload; the ratio compares the last to the first")
	flag.DurationVar(&b.phase, "rebalance-phase", 10*time.Second, "length of the rebalance workload's steady, join and leave phases (the crash phase lasts the lease TTL longer)")
	flag.DurationVar(&b.leaseTTL, "lease-ttl", 0, "worker LeaseTTL in the replicas and rebalance workloads (0: the worker's default)")
	flag.DurationVar(&b.flexDown, "flex-down", 0, "worker FlexDown in the replicas and rebalance workloads (0: the worker's default)")
	flag.BoolVar(&b.reportStarts, "report-starts", false, "internal: with -replica-of, print each task's start")
	replicaOf := flag.String("replica-of", "", "internal: run as a worker process of the replicas workload on this schema")
	memProfile := flag.String("memprofile", "", "write a heap allocation profile of the whole run (Go side) to this file")
	only := flag.String("only", "", "comma-separated workloads: enqueue, burn-own, burn-ordered, burn-traced, limited, priority, lateness, sustained (c), backlog (e), tombstones (f), claim-latency (g), recurring (h), console (i), replicas, rebalance; empty runs all")
	flag.Parse()
	if *replicaOf != "" {
		return b.replicaChild(ctx, *replicaOf)
	}
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
	if *memProfile != "" {
		runtime.MemProfileRate = 64 << 10
		defer func() {
			if f, err := os.Create(*memProfile); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				_ = f.Close()
			}
		}()
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
	for _, s := range strings.Split(*replicaCounts, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || v < 1 {
			return fmt.Errorf("-replicas: bad process count %q", s)
		}
		b.replicaCounts = append(b.replicaCounts, v)
	}
	switch {
	case b.runs < 1, b.n < 1, b.conc < 1:
		return errors.New("-runs, -n and -concurrency must be positive")
	case b.rate < 100:
		return errors.New("-rate must be at least 100")
	case b.backlogN < 2:
		return errors.New("-backlog must be at least 2")
	case b.consoleTasks < 10 || b.consoleTasks%10 != 0:
		return errors.New("-console-tasks must be a positive multiple of 10")
	case b.sustainedProducers < 1, b.sustainedBatch < 1, b.sustainedBacklog < 0:
		return errors.New("-sustained-producers and -sustained-batch must be positive, -sustained-backlog not negative")
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
	if b.citus && b.url == "" {
		return errors.New("-citus needs DATABASE_URL: a Citus coordinator (scripts/citus-cluster.sh start prints one)")
	}
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

	fmt.Fprintf(os.Stderr, "pgsched: concurrency %d, prefetch %d, %d logical partitions, table partitions %d (0: default), %d runs, Citus %t\n",
		b.conc, b.prefetch, b.partitions, b.tablePartitions, b.runs, b.citus)
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
		b.tracedWorkload(),
		b.limitedWorkload(),
		b.priorityWorkload(),
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
	all = append(all, b.tombstoneWorkload(), b.recurringWorkload(), b.consoleWorkload(), b.replicasWorkload(), b.rebalanceWorkload())
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
	if err := migrator.Up(ctx, b.url, migrator.Options{Schema: schema, Partitions: b.partitions, TablePartitions: b.tablePartitions, Citus: b.citus}); err != nil {
		return nil, nil, "", nil, err
	}
	cfg, err := pgxpool.ParseConfig(b.url)
	if err != nil {
		return nil, nil, "", nil, err
	}
	cfg.MaxConns = 50
	if b.citus {
		// Nested statements too, so a run can say how many each task costs
		// (citusStatements).
		cfg.ConnConfig.RuntimeParams["pg_stat_statements.track"] = "all"
		cfg.ConnConfig.RuntimeParams["citus.stat_statements_track"] = "all"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, "", nil, err
	}
	cc := pgsched.ClientConfig{Schema: schema}
	if b.tracing != nil {
		cc.Tracer = b.tracing.tracer
	}
	c, err := pgsched.NewClient(pool, cc)
	if err != nil {
		return nil, nil, "", nil, err
	}
	if b.citus {
		// A batch's times are taken before its call, which on the
		// one-machine cluster can outlast the 5 s default grace window.
		if _, err := pool.Exec(ctx, "SELECT "+schema+".configure(grace => '1 hour')"); err != nil {
			return nil, nil, "", nil, err
		}
	}
	cleanup := func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		pool.Close()
	}
	return pool, c, schema, cleanup, nil
}

// worker starts a pgsched worker on schema whose handler for every kind is h.
func (b *bench) worker(ctx context.Context, pool *pgxpool.Pool, schema string, h func(*pgsched.Job)) (*pgsched.Worker, error) {
	cfg := pgsched.WorkerConfig{
		Schema: schema, Concurrency: b.conc, Prefetch: b.prefetch, LeaseTTL: b.leaseTTL, FlexDown: b.flexDown, Logger: slog.New(slog.DiscardHandler),
		Handlers: map[string]pgsched.Handler{"*": pgsched.HandlerFunc(func(_ context.Context, j *pgsched.Job) error {
			h(j)
			return nil
		})},
	}
	if b.tracing != nil {
		cfg.Tracer = b.tracing.tracer
	}
	w, err := pgsched.NewWorker(pool, cfg)
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
