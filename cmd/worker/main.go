// Command worker runs one pgsched node: it claims due tasks and delivers each
// to the HTTP webhook configured for its kind.
//
// With no DATABASE_URL it starts (or reuses) a local PostgreSQL in its data
// directory, so `go run ./cmd/worker` works on a fresh machine with
// PostgreSQL's binaries installed. Every flag mirrors an environment
// variable; run with -h for the list.
//
// A bad setting exits at once, naming it. A database that is down or not
// migrated yet is retried with backoff, /readyz answering 503 with the
// reason until the worker holds its lease.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/localpg"
	"github.com/pgsched/pgsched/internal/migrator"
	"github.com/pgsched/pgsched/internal/sqlschema"
	"github.com/pgsched/pgsched/internal/webhook"
	"github.com/pgsched/pgsched/pgschedui"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// A second signal kills at once.
		<-ctx.Done()
		stop()
	}()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil && !errors.Is(err, errDone) {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

// errDone ends run with nothing more to do and exit status 0: -h, -version
// and -stop-local.
var errDone = errors.New("done")

type options struct {
	version        bool
	stopLocal      bool
	databaseURL    string
	schema         string
	nodeID         string
	httpAddr       string
	concurrency    int
	prefetch       int
	webhooks       string
	webhookSecret  string
	webhookTimeout time.Duration
	leaseTTL       time.Duration
	drainTimeout   time.Duration
	flexDown       time.Duration
	pollInterval   time.Duration
	maxAttempts    int
	dataDir        string
	migrate        bool
	logFormat      string
	recurringFile  string
	console        bool
	consoleToken   string
}

func parse(args []string, getenv func(string) string, stdout io.Writer) (options, error) {
	o, fs, errs := flags(getenv)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprintln(stdout, "Usage: worker [flags]; every flag also reads the environment variable in brackets.")
			fs.PrintDefaults()
			return *o, errDone
		}
		return *o, fmt.Errorf("%w (worker -h lists the flags)", err)
	}
	if len(*errs) > 0 {
		return *o, errors.Join(*errs...)
	}
	if fs.NArg() > 0 {
		return *o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.concurrency <= 0 {
		return *o, fmt.Errorf("PGSCHED_CONCURRENCY (-concurrency) must be positive, got %d", o.concurrency)
	}
	if o.webhookTimeout < 0 {
		return *o, fmt.Errorf("PGSCHED_WEBHOOK_TIMEOUT (-webhook-timeout) must not be negative, got %s", o.webhookTimeout)
	}
	return *o, nil
}

// flags defines the worker's flags, each defaulting to its environment
// variable (named in brackets at the end of its usage), into o; errs
// collects the variables that do not parse.
func flags(getenv func(string) string) (o *options, fs *flag.FlagSet, errs *[]error) {
	o, errs = &options{}, &[]error{}
	fs = flag.NewFlagSet("worker", flag.ContinueOnError)
	// The flag package would print a parse error and the whole usage; main
	// prints the error once, and -h prints the usage to stdout.
	fs.SetOutput(io.Discard)
	str := func(p *string, name, env, def, usage string) {
		v := getenv(env)
		if v == "" {
			v = def
		}
		fs.StringVar(p, name, v, usage+" ("+env+")")
	}
	dur := func(p *time.Duration, name, env string, def time.Duration, usage string) {
		v := def
		if s := getenv(env); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil {
				*errs = append(*errs, fmt.Errorf("%s=%q is not a duration: %w", env, s, err))
			}
			v = d
		}
		fs.DurationVar(p, name, v, usage+" ("+env+")")
	}
	integer := func(p *int, name, env string, def int, usage string) {
		v := def
		if s := getenv(env); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				*errs = append(*errs, fmt.Errorf("%s=%q is not a number", env, s))
			}
			v = n
		}
		fs.IntVar(p, name, v, usage+" ("+env+")")
	}
	home, _ := os.UserHomeDir()
	str(&o.databaseURL, "database-url", "DATABASE_URL", "", "PostgreSQL connection string; empty starts a local server")
	str(&o.schema, "schema", "PGSCHED_SCHEMA", "pgsched", "schema holding pgsched's tables")
	str(&o.nodeID, "node-id", "PGSCHED_NODE_ID", "", "this node's id (default host-pid)")
	str(&o.httpAddr, "http-addr", "PGSCHED_HTTP_ADDR", "127.0.0.1:9090", "address for /metrics, /healthz, /readyz")
	integer(&o.concurrency, "concurrency", "PGSCHED_CONCURRENCY", pgsched.DefaultConcurrency, "tasks running at once on this node")
	integer(&o.prefetch, "prefetch", "PGSCHED_PREFETCH", 0, "claimed tasks that may wait for a free handler (0: as many as -concurrency; negative: none)")
	str(&o.webhooks, "webhooks", "PGSCHED_WEBHOOKS", "", "kind=url pairs, comma-separated; *=url for any kind")
	str(&o.webhookSecret, "webhook-secret", "PGSCHED_WEBHOOK_SECRET", "", "Standard Webhooks signing secret(s), whsec_<base64>; two, comma-separated, during a rotation")
	dur(&o.webhookTimeout, "webhook-timeout", "PGSCHED_WEBHOOK_TIMEOUT", 30*time.Second, "per-request webhook timeout; a timeout retries")
	dur(&o.leaseTTL, "lease-ttl", "PGSCHED_LEASE_TTL", pgsched.DefaultLeaseTTL, "node lease TTL")
	dur(&o.drainTimeout, "drain-timeout", "PGSCHED_DRAIN_TIMEOUT", pgsched.DefaultDrainTimeout, "on SIGTERM, how long running tasks may finish")
	dur(&o.flexDown, "flex-down", "PGSCHED_FLEX_DOWN", pgsched.DefaultFlexDown, "how long a dead node's backup stands in before its partitions are reassigned")
	dur(&o.pollInterval, "poll-interval", "PGSCHED_POLL_INTERVAL", pgsched.DefaultPollInterval, "fallback check for due work")
	integer(&o.maxAttempts, "max-attempts", "PGSCHED_MAX_ATTEMPTS", 0, "runs before a failing task is dead (0: retry forever)")
	str(&o.dataDir, "data-dir", "PGSCHED_DATA_DIR", filepath.Join(home, ".local", "share", "pgsched", "postgres"), "local PostgreSQL data directory, used without DATABASE_URL")
	str(&o.logFormat, "log-format", "PGSCHED_LOG_FORMAT", "text", "text or json")
	str(&o.recurringFile, "recurring-file", "PGSCHED_RECURRING_FILE", "", "JSON file of recurring schedules to create or update at start")
	console := getenv("PGSCHED_CONSOLE") != "false"
	fs.BoolVar(&o.console, "console", console, "serve the web console at /ui/ on -http-addr (PGSCHED_CONSOLE)")
	str(&o.consoleToken, "console-token", "PGSCHED_CONSOLE_TOKEN", "", "token that enables the console's actions (retry, delete, pause, resume); empty: read-only")
	migrate := getenv("PGSCHED_MIGRATE") != "false"
	fs.BoolVar(&o.migrate, "migrate", migrate, "apply migrations at start (PGSCHED_MIGRATE)")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.BoolVar(&o.stopLocal, "stop-local", false, "stop the local PostgreSQL in -data-dir (one a worker left running) and exit")
	return o, fs, errs
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parse(args, getenv, stdout)
	if err != nil {
		return err
	}
	switch {
	case o.version:
		fmt.Fprintln(stdout, "pgsched worker", pgsched.Version(), runtime.Version())
		return errDone
	case o.stopLocal:
		stopped, err := localpg.StopDataDir(ctx, o.dataDir)
		if err != nil {
			return fmt.Errorf("stopping the local PostgreSQL in %s: %w", o.dataDir, err)
		}
		if stopped {
			fmt.Fprintln(stdout, "pgsched: stopped the local PostgreSQL in", o.dataDir)
		} else {
			fmt.Fprintln(stdout, "pgsched: no local PostgreSQL runs in", o.dataDir)
		}
		return errDone
	}
	var handler slog.Handler = slog.NewTextHandler(stderr, nil)
	if o.logFormat == "json" {
		handler = slog.NewJSONHandler(stderr, nil)
	}
	logger := slog.New(handler)

	routes, exec, err := webhooks(o)
	if err != nil {
		return err
	}
	if o.databaseURL == "" {
		stop, err := startLocal(ctx, &o, routes, stdout, logger)
		if err != nil {
			return err
		}
		defer stop()
	}
	pool, err := openPool(ctx, o)
	if err != nil {
		return err
	}
	defer pool.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Every setting is checked here, before the database is touched: a bad
	// one exits at once instead of being retried like a database not yet up.
	cfg := workerConfig(o, exec, logger, reg)
	if cfg.Recurring, err = loadRecurring(o.recurringFile); err != nil {
		return err
	}
	w, err := pgsched.NewWorker(pool, cfg)
	if err != nil {
		return namingSetting(err)
	}
	if routes.Len() > 0 {
		fmt.Fprintf(stdout, "pgsched: delivering tasks by HTTP POST per PGSCHED_WEBHOOKS=%s\n", routes)
	}

	state := &readiness{reason: "starting"}
	var ui http.Handler
	if o.console {
		if ui, err = pgschedui.New(pool, pgschedui.Config{Schema: o.schema, Token: o.consoleToken, Logger: logger}); err != nil {
			return err
		}
	}
	httpSrv, err := serveHTTP(o.httpAddr, reg, state.check, ui)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = httpSrv.Shutdown(sctx)
	}()
	logger.Info("http listening", "addr", o.httpAddr)

	if err := bringUp(ctx, o, w, state, logger); err != nil {
		if ctx.Err() != nil {
			// Stopped while still coming up: a failed Start leaves nothing running.
			return nil
		}
		return err
	}
	state.started(w)
	<-ctx.Done()
	logger.Info("stopping: draining running tasks", "drain_timeout", o.drainTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), o.drainTimeout+10*time.Second)
	defer cancel()
	return w.Stop(sctx)
}

// webhooks parses PGSCHED_WEBHOOKS; exec is nil when none are set.
func webhooks(o options) (webhook.Routes, *webhook.Executor, error) {
	if o.webhooks == "" {
		return webhook.Routes{}, nil, nil
	}
	routes, err := webhook.ParseRoutes(o.webhooks)
	if err != nil {
		return routes, nil, fmt.Errorf("PGSCHED_WEBHOOKS (-webhooks): %w", err)
	}
	var secrets [][]byte
	if o.webhookSecret != "" {
		if secrets, err = webhook.ParseSecrets(o.webhookSecret); err != nil {
			return routes, nil, fmt.Errorf("PGSCHED_WEBHOOK_SECRET (-webhook-secret): %w", err)
		}
	}
	exec, err := webhook.New(webhook.Config{Routes: routes, Secrets: secrets, Timeout: o.webhookTimeout,
		BeforeSend: pgsched.CheckFence})
	if err != nil {
		return routes, nil, err
	}
	return routes, exec, nil
}

// startLocal starts (or reuses) the local PostgreSQL in o.dataDir and points
// o at it; stop stops it.
func startLocal(ctx context.Context, o *options, routes webhook.Routes, stdout io.Writer, logger *slog.Logger) (stop func(), err error) {
	srv, err := localpg.Start(ctx, localpg.Options{DataDir: o.dataDir, Durable: true, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("no DATABASE_URL, and starting a local PostgreSQL failed: %w", err)
	}
	o.databaseURL = srv.URL()
	o.migrate = true
	fmt.Fprintf(stdout, `pgsched: no DATABASE_URL given; using the local PostgreSQL in %s
  connect:  psql '%s'
  enqueue:  SELECT %s.schedule('my-order', now() + interval '5 seconds', '', '{"hello":"world"}', 'default');
  watch:    SELECT * FROM %s.tasks;  SELECT * FROM %s.completions;
`, o.dataDir, o.databaseURL, o.schema, o.schema, o.schema)
	if routes.Len() == 0 {
		fmt.Fprintln(stdout, "  deliver:  no PGSCHED_WEBHOOKS set, so tasks will fail and retry; e.g. PGSCHED_WEBHOOKS='*=http://127.0.0.1:8080/hook'")
	}
	return func() { _ = srv.Stop(context.WithoutCancel(ctx)) }, nil
}

// openPool opens the handlers' pool. It connects lazily, so it succeeds
// while the database is down.
func openPool(ctx context.Context, o options) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(o.databaseURL)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL (-database-url): %w", err)
	}
	cfg.MaxConns = max(cfg.MaxConns, 8)
	return pgxpool.NewWithConfig(ctx, cfg)
}

func workerConfig(o options, exec *webhook.Executor, logger *slog.Logger, reg prometheus.Registerer) pgsched.WorkerConfig {
	return pgsched.WorkerConfig{
		Schema:       o.schema,
		NodeID:       o.nodeID,
		Concurrency:  o.concurrency,
		Prefetch:     o.prefetch,
		LeaseTTL:     o.leaseTTL,
		PollInterval: o.pollInterval,
		DrainTimeout: o.drainTimeout,
		FlexDown:     o.flexDown,
		Retry:        pgsched.RetryPolicy{MaxAttempts: o.maxAttempts},
		Logger:       logger,
		Registerer:   reg,
		Handlers:     map[string]pgsched.Handler{"*": pgsched.HandlerFunc(deliver(exec))},
	}
}

// settingOf names the variable and flag behind each Config field that
// workerConfig sets from them.
var settingOf = map[string]string{
	"Schema":       "PGSCHED_SCHEMA (-schema)",
	"NodeID":       "PGSCHED_NODE_ID (-node-id)",
	"Concurrency":  "PGSCHED_CONCURRENCY (-concurrency)",
	"Prefetch":     "PGSCHED_PREFETCH (-prefetch)",
	"LeaseTTL":     "PGSCHED_LEASE_TTL (-lease-ttl)",
	"PollInterval": "PGSCHED_POLL_INTERVAL (-poll-interval)",
	"DrainTimeout": "PGSCHED_DRAIN_TIMEOUT (-drain-timeout)",
	"FlexDown":     "PGSCHED_FLEX_DOWN (-flex-down)",
	"Retry":        "PGSCHED_MAX_ATTEMPTS (-max-attempts)",
}

// namingSetting prefixes a config error with the setting it came from.
func namingSetting(err error) error {
	var ce *pgsched.ConfigError
	if errors.As(err, &ce) {
		if s, ok := settingOf[ce.Field]; ok {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return err
}

// bringUp migrates (when asked) and starts w, retrying with backoff while
// the database is unreachable or not migrated yet, and giving up at once on
// what no retry can fix.
func bringUp(ctx context.Context, o options, w *pgsched.Worker, state *readiness, logger *slog.Logger) error {
	if o.migrate {
		err := retry(ctx, "migrating", state, logger, func() error {
			return migrator.Up(ctx, o.databaseURL, migrator.Options{Schema: o.schema, Logger: logger})
		})
		if err != nil {
			return err
		}
	}
	state.starting(w)
	return retry(ctx, "starting worker", state, logger, func() error { return w.Start(ctx) })
}

// retry calls f until it succeeds, ctx ends or it fails for good; every
// failure on the way is /readyz's reason.
func retry(ctx context.Context, what string, state *readiness, logger *slog.Logger, f func() error) error {
	backoff := 500 * time.Millisecond
	for {
		err := f()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case permanent(err):
			return err
		}
		state.notReady(fmt.Sprintf("%s failed, retrying: %v", what, err))
		logger.Warn(what+" failed; retrying", "error", err, "in", backoff)
		if !sleep(ctx, backoff) {
			return ctx.Err()
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// permanent reports the errors no retry can fix. Anything else from the
// database (unreachable, schema not migrated yet, a concurrent migration,
// a missing grant) may heal.
func permanent(err error) bool {
	return errors.Is(err, pgsched.ErrInvalidConfig) || errors.Is(err, sqlschema.ErrInvalidName) ||
		errors.Is(err, pgsched.ErrAlreadyStarted)
}

// readiness is what /readyz reports: ready once the worker has started and
// holds a live lease; until it has started, the last reason it has not.
type readiness struct {
	mu     sync.Mutex
	worker *pgsched.Worker
	reason string
	// pending is the worker while Start runs: it may wait for its node id
	// or out a failover, and says so.
	pending *pgsched.Worker
}

func (r *readiness) starting(w *pgsched.Worker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = w
}

func (r *readiness) notReady(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reason = reason
}

func (r *readiness) started(w *pgsched.Worker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.worker = w
}

func (r *readiness) check() (ready bool, reason string) {
	r.mu.Lock()
	w, reason, pending := r.worker, r.reason, r.pending
	r.mu.Unlock()
	if w == nil {
		if pending != nil {
			if err := pending.Readiness(); errors.Is(err, pgsched.ErrNodeIDInUse) || errors.Is(err, pgsched.ErrFailoverWait) {
				return false, err.Error()
			}
		}
		return false, reason
	}
	if err := w.Readiness(); err != nil {
		return false, err.Error()
	}
	return true, ""
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func deliver(exec *webhook.Executor) func(ctx context.Context, job *pgsched.Job) error {
	return func(ctx context.Context, job *pgsched.Job) error {
		if exec == nil {
			return fmt.Errorf("no webhook configured for kind %q: set PGSCHED_WEBHOOKS", job.Kind)
		}
		err := exec.Deliver(ctx, webhook.Task{
			OrderingID: job.OrderingID, ScheduledAt: job.ScheduledAt, UniquenessKey: job.UniquenessKey,
			Kind: job.Kind, Payload: job.Payload, Attempt: job.Attempt,
		})
		if err != nil && webhook.IsPermanent(err) {
			return pgsched.Permanent(err)
		}
		return err
	}
}

func serveHTTP(addr string, reg *prometheus.Registry, ready func() (bool, string), ui http.Handler) (*http.Server, error) {
	mux := http.NewServeMux()
	if ui != nil {
		mux.Handle("/ui/", ui)
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ok, reason := ready(); !ok {
			http.Error(w, "not ready: "+reason, http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("PGSCHED_HTTP_ADDR %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, nil
}
