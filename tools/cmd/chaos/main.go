// Command chaos checks pgsched's guarantees under faults, end to end: real
// cmd/worker processes, a real PostgreSQL, a real webhook.
//
// Unit and cluster tests cover each mechanism (leases, fencing, hand-overs)
// in-process, where a "crash" is a cancelled context. What only whole
// processes show is how those mechanisms add up when a worker is SIGKILLed
// between a webhook's answer and the outcome's commit, frozen past its lease
// and thawed, or cut off by a database that restarts or disappears. So this
// command builds the worker, starts a few, enqueues tasks over many
// ordering_ids spread over a window, injects faults on a seeded schedule,
// waits for every task to complete, and then checks what the webhook
// receiver saw against what was enqueued and what the database recorded:
//
//   - nothing is lost: every key answered 2xx and has a completion row;
//   - tasks of one ordering_id run in order and never two at once;
//   - a task runs again only when a fault explains it (at-least-once, not
//     "whenever").
//
// It prints a report and exits 1 when a check fails, 2 when the run could
// not be carried out. See docs/chaos.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsched/pgsched/tools/internal/rootmodule"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// A second signal kills at once.
		<-ctx.Done()
		stop()
	}()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, errFailed):
		os.Exit(1)
	case err != nil:
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
}

// errFailed: the run completed and a check failed; the report says which.
var errFailed = errors.New("a check failed")

type options struct {
	workers  int
	tasks    int
	ids      int
	duration time.Duration
	ttl      time.Duration
	mode     string
	seed     uint64
	out      string
	short    bool
	freezes  int
	settle   time.Duration
	outage   time.Duration
	fail500  time.Duration
	limit    int
	// killEvery is the range a kill recurs in (a preset, no flag).
	killEvery [2]time.Duration
}

// The presets. Flags given explicitly win over them.
var (
	longPreset = options{
		workers: 3, tasks: 20_000, ids: 500, duration: 4 * time.Minute, ttl: 4 * time.Second,
		freezes: 4, settle: 3 * time.Minute, outage: 30 * time.Second, fail500: 4 * time.Second,
		killEvery: [2]time.Duration{5 * time.Second, 12 * time.Second},
	}
	shortPreset = options{
		workers: 3, tasks: 3_000, ids: 100, duration: time.Minute, ttl: 4 * time.Second,
		freezes: 2, settle: 90 * time.Second, outage: 30 * time.Second, fail500: 3 * time.Second,
		killEvery: [2]time.Duration{12 * time.Second, 20 * time.Second},
	}
)

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.workers, "workers", 0, "worker processes (default 3)")
	fs.IntVar(&o.tasks, "tasks", 0, "tasks to enqueue (default 20000; -short 3000)")
	fs.IntVar(&o.ids, "ids", 0, "ordering_ids the tasks are spread over (default 500; -short 100)")
	fs.DurationVar(&o.duration, "duration", 0, "window the tasks are scheduled over; faults happen within it (default 4m; -short 1m)")
	fs.DurationVar(&o.ttl, "ttl", 0, "workers' lease TTL; a freeze lasts twice as long (default 4s)")
	fs.StringVar(&o.mode, "mode", "faults", "faults: kills, freezes, an immediate PostgreSQL restart, a webhook 500 spell; outage: the same with PostgreSQL down for -outage instead of the restart; failover: the same with a synchronous standby promoted when the primary is killed, instead of the restart")
	fs.Uint64Var(&o.seed, "seed", 0, "seed of the fault plan and task times (default: from the clock; printed)")
	fs.StringVar(&o.out, "out", "", "directory for worker logs, report.txt, deliveries.csv and faults.json (default: a new temporary directory)")
	fs.BoolVar(&o.short, "short", false, "the CI preset: about two minutes in all")
	fs.IntVar(&o.freezes, "freezes", 0, "workers frozen (SIGSTOP) for twice the TTL (default 4; -short 2)")
	fs.DurationVar(&o.settle, "settle", 0, "how long after the window every task may take to complete (default 3m; -short 90s)")
	fs.DurationVar(&o.outage, "outage", 0, "how long PostgreSQL stays down with -mode outage (default 30s)")
	fs.IntVar(&o.limit, "limit", 0, "limit the tasks' kind to this many running at once (pgsched.set_limit) and check that the receiver never serves more at once; 0: no limit")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	preset := longPreset
	if o.short {
		preset = shortPreset
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	fill := func(name string, p *int, v int) {
		if !set[name] {
			*p = v
		}
	}
	fillDur := func(name string, p *time.Duration, v time.Duration) {
		if !set[name] {
			*p = v
		}
	}
	fill("workers", &o.workers, preset.workers)
	fill("tasks", &o.tasks, preset.tasks)
	fill("ids", &o.ids, preset.ids)
	fill("freezes", &o.freezes, preset.freezes)
	fillDur("duration", &o.duration, preset.duration)
	fillDur("ttl", &o.ttl, preset.ttl)
	if o.mode == "failover" && !set["duration"] {
		// The failover's quiet span comes on top of the preset's window.
		o.duration += failoverGap(o.ttl)
	}
	fillDur("settle", &o.settle, preset.settle)
	fillDur("outage", &o.outage, preset.outage)
	o.fail500, o.killEvery = preset.fail500, preset.killEvery
	if !set["seed"] {
		o.seed = uint64(time.Now().UnixNano())
	}
	switch {
	case o.mode != "faults" && o.mode != "outage" && o.mode != "failover":
		return o, fmt.Errorf("-mode %q: want faults, outage or failover", o.mode)
	case o.workers < 2:
		return o, fmt.Errorf("-workers %d: at least 2, so a backup can stand in", o.workers)
	case o.tasks < 1 || o.ids < 1 || o.ids > o.tasks:
		return o, fmt.Errorf("-tasks %d over -ids %d: want 1 <= ids <= tasks", o.tasks, o.ids)
	case o.duration < 20*time.Second:
		return o, fmt.Errorf("-duration %s: at least 20s, to fit the faults", o.duration)
	case o.ttl < time.Second:
		return o, fmt.Errorf("-ttl %s: at least 1s", o.ttl)
	case o.freezes < 0:
		return o, fmt.Errorf("-freezes %d: must not be negative", o.freezes)
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	began := time.Now()
	logger := slog.New(slog.NewTextHandler(stderr, nil))

	root, err := rootmodule.Dir()
	if err != nil {
		return err
	}
	outDir, err := outputDir(o.out)
	if err != nil {
		return err
	}
	// PostgreSQL runs as user postgres when we are root, so its data
	// directory's parent must be searchable by it.
	work, err := os.MkdirTemp("", "pgsched-chaos-work-")
	if err != nil {
		return fmt.Errorf("work directory: %w", err)
	}
	defer os.RemoveAll(work)
	if err := os.Chmod(work, 0o755); err != nil {
		return fmt.Errorf("work directory: %w", err)
	}
	databaseURL := os.Getenv("DATABASE_URL")
	if databaseURL != "" && o.mode != "faults" {
		return fmt.Errorf("-mode %s needs a PostgreSQL of its own: unset DATABASE_URL", o.mode)
	}
	schema := "chaos"
	if databaseURL != "" {
		schema = fmt.Sprintf("chaos_%d", time.Now().Unix())
	}
	logger.Info("chaos run", "mode", o.mode, "seed", o.seed, "workers", o.workers, "tasks", o.tasks, "ids", o.ids,
		"window", o.duration, "ttl", o.ttl, "out", outDir)

	// The build and the database start take about as long; overlap them.
	bin := filepath.Join(work, "worker")
	built := make(chan error, 1)
	go func() { built <- buildWorker(ctx, root, bin, stderr, logger) }()
	db, err := openDatabase(ctx, databaseURL, work, schema, o.mode == "failover", logger)
	if err != nil {
		<-built
		return err
	}
	defer db.close(context.WithoutCancel(ctx))
	if err := <-built; err != nil {
		return err
	}

	recv, err := startReceiver(logger)
	if err != nil {
		return err
	}
	defer func() { _ = recv.close(context.WithoutCancel(ctx)) }()

	const drainTimeout = 2 * time.Second
	cl, err := newCluster(bin, outDir, o.workers, workerConfig{
		databaseURL: db.url, schema: schema, receiverURL: recv.url,
		leaseTTL: o.ttl, drainTimeout: drainTimeout, flexDown: 20 * time.Second,
	}, logger)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(o.seed, 0x636861))
	inj := &injector{cluster: cl, pg: db.pg, standby: db.standby, db: db, recv: recv, rng: rng, logger: logger, ttl: o.ttl,
		busy: map[*node]bool{}}
	cl.crashFunc = inj.record
	stopWorkers := func() { cl.stopAll(drainTimeout + 10*time.Second) }
	defer stopWorkers()
	logger.Info("starting workers", "logs", outDir)
	if err := cl.startAll(ctx, time.Minute); err != nil {
		return err
	}
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	go watchStalls(watchCtx, inj.record, logger)

	t0 := time.Now().Add(3 * time.Second).Truncate(dueGrid)
	all := spreadTasks(rng, o.tasks, o.ids, t0, o.duration)
	if o.limit > 0 {
		if _, err := db.pool.Exec(ctx, "SELECT "+pgx.Identifier{schema}.Sanitize()+".set_limit('chaos', max_running => $1)", o.limit); err != nil {
			return fmt.Errorf("setting the limit: %w", err)
		}
	}
	enqStart := time.Now()
	if err := enqueue(ctx, db.pool, schema, all, 2000); err != nil {
		return err
	}
	logger.Info("enqueued", "tasks", len(all), "took", time.Since(enqStart).Round(time.Millisecond))

	steps := plan(rng, planConfig{
		window: o.duration, mode: o.mode, ttl: o.ttl, killEvery: o.killEvery,
		freezes: o.freezes, outage: o.outage, fail500: o.fail500,
	})
	injected := make(chan struct{})
	go func() {
		defer close(injected)
		inj.run(ctx, t0, steps)
	}()
	settled := waitSettled(ctx, db, recv, injected, t0.Add(o.duration), o.settle, o.tasks, logger)
	<-injected
	stopWorkers()
	stopWatching()

	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	completed, err := db.completions(rctx)
	if err != nil {
		return err
	}
	deadTasks, err := db.dead(rctx)
	if err != nil {
		return err
	}
	deliveries := recv.snapshot()
	enqueued := make([]Key, len(all))
	for i, t := range all {
		enqueued[i] = keyOf(t.OrderingID, t.ScheduledAt, t.UniquenessKey)
	}
	report := Check(Input{Enqueued: enqueued, Completed: completed, Deliveries: deliveries, Faults: inj.recorded(), LeaseTTL: o.ttl,
		Limit: o.limit})

	f, err := os.Create(filepath.Join(outDir, "report.txt"))
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer f.Close()
	w := io.MultiWriter(stdout, f)
	fmt.Fprintf(w, "mode %s, seed %d, %d workers, %d tasks over %d ordering_ids in a %s window, lease TTL %s\n",
		o.mode, o.seed, o.workers, o.tasks, o.ids, o.duration, o.ttl)
	if o.limit > 0 {
		fmt.Fprintf(w, "the tasks' kind limited to %d running at once\n", o.limit)
	}
	if settled {
		fmt.Fprintln(w, "every task completed")
	} else {
		fmt.Fprintf(w, "NOT every task completed within %s after the window\n", o.settle)
	}
	if deadTasks > 0 {
		fmt.Fprintf(w, "dead tasks: %d (the workers retry forever, so none should be)\n", deadTasks)
	}
	report.Print(w, time.Since(began), 20)
	slow := false
	if o.mode == "failover" {
		slow = printFailover(w, cl, inj.failoverBack(), o.ttl)
	}
	var logs []string
	for _, nd := range cl.nodes {
		logs = append(logs, nd.logPath)
	}
	summarizeLogs(w, logs)
	fmt.Fprintf(w, "output: %s (report.txt, deliveries.csv, faults.json, w*.log)\n", outDir)
	if err := writeDeliveries(filepath.Join(outDir, "deliveries.csv"), deliveries); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(outDir, "faults.json"), report.Faults); err != nil {
		return err
	}
	failed := report.Failed() || deadTasks > 0 || slow
	if failed {
		fmt.Fprintln(w, "== FAIL")
	} else {
		fmt.Fprintln(w, "== PASS")
	}
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", ctx.Err())
	}
	if failed {
		return errFailed
	}
	return nil
}

// printFailover says how long after the promotion each worker was ready
// on the new primary, and reports whether any took longer than a lease
// TTL plus failoverReadyWithin, or never was.
func printFailover(w io.Writer, cl *cluster, back map[string]time.Duration, ttl time.Duration) (slow bool) {
	bound := ttl + failoverReadyWithin
	fmt.Fprintf(w, "failover: each worker ready on the promoted standby within %s (lease TTL + %s) of the promotion:", bound, failoverReadyWithin)
	for _, nd := range cl.nodes {
		d, ok := back[nd.id]
		switch {
		case !ok:
			fmt.Fprintf(w, " %s never", nd.id)
			slow = true
		default:
			fmt.Fprintf(w, " %s %s", nd.id, d.Round(10*time.Millisecond))
			slow = slow || d > bound
		}
	}
	fmt.Fprintln(w)
	if slow {
		fmt.Fprintln(w, "failover: a worker was not back in time")
	}
	return slow
}

// waitSettled waits for the window to pass and the faults to end, then for
// every task to complete, until settle after the window. It reports
// whether every task completed.
func waitSettled(ctx context.Context, db *database, recv *receiver, injected <-chan struct{}, windowEnd time.Time,
	settle time.Duration, n int, logger *slog.Logger) bool {
	deadline := windowEnd.Add(settle)
	lastLog := time.Now()
	for {
		if !sleep(ctx, time.Second) {
			return false
		}
		tasks, completions, err := db.progress(ctx)
		if time.Since(lastLog) >= 10*time.Second {
			lastLog = time.Now()
			if err != nil {
				logger.Info("progress", "deliveries", recv.count(), "db_error", err)
			} else {
				logger.Info("progress", "deliveries", recv.count(), "tasks_left", tasks, "completions", completions, "of", n)
			}
		}
		select {
		case <-injected:
			if err == nil && time.Now().After(windowEnd) && tasks == 0 && completions >= n {
				logger.Info("every task completed", "completions", completions)
				return true
			}
		default:
		}
		if time.Now().After(deadline) {
			logger.Error("gave up waiting for the tasks to complete", "tasks_left", tasks, "completions", completions, "of", n)
			return false
		}
	}
}

func outputDir(dir string) (string, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "pgsched-chaos-")
		if err != nil {
			return "", fmt.Errorf("output directory: %w", err)
		}
		return d, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("output directory: %w", err)
	}
	return filepath.Abs(dir)
}

func buildWorker(ctx context.Context, root, bin string, stderr io.Writer, logger *slog.Logger) error {
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/worker")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building cmd/worker: %w", err)
	}
	logger.Info("built cmd/worker", "took", time.Since(start).Round(time.Millisecond))
	return nil
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
