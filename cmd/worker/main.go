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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
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
	webhookOutput  bool
}

// The ranges of the worker's numeric settings. Outside them a value is a
// typo or the wrong unit, never a setting that works as meant: a lease of
// 0s or 1000000h, a poll every nanosecond (hundreds of statements a
// second), more handlers than one node should run.
const (
	minLeaseTTL, maxLeaseTTL             = time.Second, 10 * time.Minute
	minPollInterval, maxPollInterval     = 10 * time.Millisecond, 10 * time.Minute
	minDrainTimeout, maxDrainTimeout     = time.Second, time.Hour
	minFlexDown, maxFlexDown             = time.Second, 24 * time.Hour
	minWebhookTimeout, maxWebhookTimeout = 100 * time.Millisecond, time.Hour
	maxMaxAttempts                       = 10_000
	// maxNodeID matches the other identifiers' limit (ordering_id, kind):
	// longer ids, or bytes PostgreSQL refuses as text, would fail every
	// registration, which the worker retries for ever.
	maxNodeID = 255
)

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

	// Every setting is checked before anything starts (a local PostgreSQL,
	// the HTTP server) or the database is touched: a bad one exits at once
	// instead of being retried like a database not yet up.
	routes, exec, err := webhooks(o)
	if err != nil {
		return err
	}
	recurring, err := loadRecurring(o.recurringFile)
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
	cfg := workerConfig(o, exec, logger, reg)
	cfg.Recurring = recurring
	// parse refuses what NewWorker would: its check is the library's own,
	// naming the field, which namingSetting turns into the variable.
	w, err := pgsched.NewWorker(pool, cfg)
	if err != nil {
		return namingSetting(err)
	}
	if routes.Len() > 0 {
		// Routes show each URL as scheme://host only.
		fmt.Fprintf(stdout, "pgsched: delivering tasks by HTTP POST per PGSCHED_WEBHOOKS=%s\n", routes)
	}

	state := &readiness{reason: "starting"}
	var ui http.Handler
	if o.console {
		if ui, err = pgschedui.New(pool, pgschedui.Config{Schema: o.schema, Token: o.consoleToken, Logger: logger}); err != nil {
			if errors.Is(err, pgschedui.ErrShortToken) {
				err = fmt.Errorf("PGSCHED_CONSOLE_TOKEN (-console-token): %w", err)
			}
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

	if err := bringUp(ctx, o, pool, w, state, logger); err != nil {
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

// webhooks parses PGSCHED_WEBHOOKS and PGSCHED_WEBHOOK_SECRET; exec is nil
// when no routes are set. A secret is checked without routes too, so a bad
// one never waits for the day routes are added.
func webhooks(o options) (webhook.Routes, *webhook.Executor, error) {
	var secrets [][]byte
	if o.webhookSecret != "" {
		var err error
		if secrets, err = webhook.ParseSecrets(o.webhookSecret); err != nil {
			return webhook.Routes{}, nil, fmt.Errorf("%s: %w", setting("PGSCHED_WEBHOOK_SECRET", "webhook-secret"), err)
		}
	}
	if o.webhooks == "" {
		return webhook.Routes{}, nil, nil
	}
	routes, err := webhook.ParseRoutes(o.webhooks)
	if err != nil {
		return routes, nil, fmt.Errorf("%s: %w", setting("PGSCHED_WEBHOOKS", "webhooks"), err)
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
		return nil, fmt.Errorf("%s does not parse: %s (the value is not shown: it may hold a password)",
			setting("DATABASE_URL", "database-url"), parseProblem(err))
	}
	cfg.MaxConns = max(cfg.MaxConns, 8)
	return pgxpool.NewWithConfig(ctx, cfg)
}

// parseProblem is what a connection string parse error says is wrong,
// without the string: pgx's message quotes it with only the password
// masked (user, host names, options and all), and its cause, from
// net/url, quotes it whole.
func parseProblem(err error) string {
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return "not a PostgreSQL connection string"
	}
	// "cannot parse `<string>`: <problem>" and " (<cause>)" when wrapping.
	msg := pe.Error()
	if cause := pe.Unwrap(); cause != nil {
		msg = strings.TrimSuffix(msg, " ("+cause.Error()+")")
	}
	if i := strings.LastIndex(msg, "`: "); i >= 0 && !strings.Contains(msg[i+3:], "`") {
		return msg[i+3:]
	}
	return "not a PostgreSQL connection string"
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
		Handlers:     map[string]pgsched.Handler{"*": pgsched.HandlerFunc(deliver(exec, o.webhookOutput, logger))},
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
func bringUp(ctx context.Context, o options, pool *pgxpool.Pool, w *pgsched.Worker, state *readiness, logger *slog.Logger) error {
	if o.migrate {
		err := retry(ctx, "migrating", state, logger, func() error {
			// From the pool's parsed configuration, not DATABASE_URL again:
			// its pool_* settings are the pool's, and PostgreSQL refuses
			// them as session parameters.
			m, err := migrator.OpenConfig(ctx, pool.Config().ConnConfig.Copy(), migrator.Options{Schema: o.schema, Logger: logger, Upgrade: "the worker"})
			if err != nil {
				return err
			}
			defer m.Close()
			return m.Up(ctx)
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
		errors.Is(err, pgsched.ErrAlreadyStarted) || errors.Is(err, pgsched.ErrSchemaNewer)
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

func deliver(exec *webhook.Executor, keepAnswer bool, logger *slog.Logger) func(ctx context.Context, job *pgsched.Job) error {
	keep := 0
	if keepAnswer {
		keep = pgsched.DefaultMaxOutputBytes
	}
	return func(ctx context.Context, job *pgsched.Job) error {
		if exec == nil {
			return fmt.Errorf("no webhook configured for kind %q: set PGSCHED_WEBHOOKS", job.Kind)
		}
		answer, err := exec.DeliverAnswer(ctx, webhook.Task{
			OrderingID: job.OrderingID, ScheduledAt: job.ScheduledAt, UniquenessKey: job.UniquenessKey,
			Kind: job.Kind, Payload: job.Payload, Attempt: job.Attempt,
		}, keep)
		if err == nil && len(bytes.TrimSpace(answer)) > 0 {
			// The task was delivered: an answer that cannot be kept
			// costs the output only, never the completion.
			if len(answer) > keep {
				logger.Warn("webhook answer not kept as the task's output: too large", "kind", job.Kind,
					"ordering_id", job.OrderingID, "max_bytes", keep)
			} else if rerr := job.RecordOutput(json.RawMessage(answer)); rerr != nil {
				logger.Warn("webhook answer not kept as the task's output", "kind", job.Kind,
					"ordering_id", job.OrderingID, "error", rerr)
			}
		}
		if err != nil && webhook.IsPermanent(err) {
			return pgsched.Permanent(err)
		}
		// A receiver that says when to come back (429 or 503 with
		// Retry-After) is busy, not failing: the task waits without using
		// an attempt.
		var se *webhook.StatusError
		if errors.As(err, &se) && se.RetryAfter > 0 {
			return pgsched.Snooze(se.RetryAfter)
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
		return nil, fmt.Errorf("%s %s: %w", setting("PGSCHED_HTTP_ADDR", "http-addr"), addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, nil
}
