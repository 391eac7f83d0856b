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
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

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
}

func parse(args []string, getenv func(string) string, stdout io.Writer) (options, error) {
	o, fs, check := flags(getenv)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprintln(stdout, "Usage: worker [flags]; every flag also reads the environment variable in brackets.")
			fs.PrintDefaults()
			return *o, errDone
		}
		return *o, fmt.Errorf("%w (worker -h lists the flags)", err)
	}
	if fs.NArg() > 0 {
		return *o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return *o, check()
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

// flags defines the worker's flags, each defaulting to its environment
// variable (named in brackets at the end of its usage), into o. After
// fs.Parse, check returns the variables that do not parse and the settings
// out of their range, each naming its variable and flag.
func flags(getenv func(string) string) (o *options, fs *flag.FlagSet, check func() error) {
	o = &options{}
	var envErrs, checks []func() error
	fs = flag.NewFlagSet("worker", flag.ContinueOnError)
	// The flag package would print a parse error and the whole usage; main
	// prints the error once, and -h prints the usage to stdout.
	fs.SetOutput(io.Discard)
	bad := func(format string, args ...any) {
		err := fmt.Errorf(format, args...)
		envErrs = append(envErrs, func() error { return err })
	}
	str := func(p *string, name, env, def, usage string) {
		v := getenv(env)
		if v == "" {
			v = def
		}
		fs.StringVar(p, name, v, usage+" ("+env+")")
	}
	// secret is a string setting that -h shows only as set or not.
	secret := func(p *string, name, env, usage string) {
		*p = getenv(env)
		fs.Var((*secretValue)(p), name, usage+" ("+env+")")
	}
	dur := func(p *time.Duration, name, env string, def, lo, hi time.Duration, usage string) {
		between := "between " + fmtDuration(lo) + " and " + fmtDuration(hi)
		v := def
		if s := getenv(env); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil {
				bad("%s must be a duration %s, got %q", setting(env, name), between, s)
			}
			v = d
		}
		fs.DurationVar(p, name, v, usage+"; "+fmtDuration(lo)+".."+fmtDuration(hi)+" ("+env+")")
		checks = append(checks, func() error {
			if *p < lo || *p > hi {
				return fmt.Errorf("%s must be %s, got %s", setting(env, name), between, fmtDuration(*p))
			}
			return nil
		})
	}
	// integer accepts lo..hi; lo = math.MinInt leaves it unbounded below.
	integer := func(p *int, name, env string, def, lo, hi int, usage string) {
		within, short := fmt.Sprintf("between %d and %d", lo, hi), fmt.Sprintf("%d..%d", lo, hi)
		if lo == math.MinInt {
			within = fmt.Sprintf("at most %d", hi)
			short = within
		}
		v := def
		if s := getenv(env); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				bad("%s must be a whole number %s, got %q", setting(env, name), within, s)
			}
			v = n
		}
		fs.IntVar(p, name, v, usage+"; "+short+" ("+env+")")
		checks = append(checks, func() error {
			if *p < lo || *p > hi {
				return fmt.Errorf("%s must be %s, got %d", setting(env, name), within, *p)
			}
			return nil
		})
	}
	boolean := func(p *bool, name, env string, def bool, usage string) {
		v := def
		if s := getenv(env); s != "" {
			b, err := strconv.ParseBool(s)
			if err != nil {
				bad("%s must be true or false (or 1, 0, t, f), got %q", setting(env, name), s)
			}
			v = b
		}
		fs.BoolVar(p, name, v, usage+" ("+env+")")
	}
	home, _ := os.UserHomeDir()
	secret(&o.databaseURL, "database-url", "DATABASE_URL", "PostgreSQL connection `URL` (or key=value string); empty starts a local server")
	str(&o.schema, "schema", "PGSCHED_SCHEMA", "pgsched", "schema holding pgsched's tables")
	str(&o.nodeID, "node-id", "PGSCHED_NODE_ID", "", "this node's id (default host-pid)")
	str(&o.httpAddr, "http-addr", "PGSCHED_HTTP_ADDR", "127.0.0.1:9090", "host:port for /metrics, /healthz, /readyz")
	integer(&o.concurrency, "concurrency", "PGSCHED_CONCURRENCY", pgsched.DefaultConcurrency, 1, pgsched.MaxConcurrency,
		"tasks running at once on this node")
	integer(&o.prefetch, "prefetch", "PGSCHED_PREFETCH", 0, math.MinInt, pgsched.MaxPrefetch,
		"claimed tasks that may wait for a free handler (0: as many as -concurrency; negative: none)")
	secret(&o.webhooks, "webhooks", "PGSCHED_WEBHOOKS", "`kind=url` pairs, comma-separated; *=url for any kind")
	secret(&o.webhookSecret, "webhook-secret", "PGSCHED_WEBHOOK_SECRET", "Standard Webhooks signing `secret`(s), whsec_<base64>; two, comma-separated, during a rotation")
	dur(&o.webhookTimeout, "webhook-timeout", "PGSCHED_WEBHOOK_TIMEOUT", webhook.DefaultTimeout, minWebhookTimeout, maxWebhookTimeout,
		"per-request webhook timeout; a timeout retries")
	dur(&o.leaseTTL, "lease-ttl", "PGSCHED_LEASE_TTL", pgsched.DefaultLeaseTTL, minLeaseTTL, maxLeaseTTL, "node lease TTL")
	dur(&o.drainTimeout, "drain-timeout", "PGSCHED_DRAIN_TIMEOUT", pgsched.DefaultDrainTimeout, minDrainTimeout, maxDrainTimeout,
		"on SIGTERM, how long running tasks may finish")
	dur(&o.flexDown, "flex-down", "PGSCHED_FLEX_DOWN", pgsched.DefaultFlexDown, minFlexDown, maxFlexDown,
		"how long a dead node's backup stands in before its partitions are reassigned")
	dur(&o.pollInterval, "poll-interval", "PGSCHED_POLL_INTERVAL", pgsched.DefaultPollInterval, minPollInterval, maxPollInterval,
		"fallback check for due work")
	integer(&o.maxAttempts, "max-attempts", "PGSCHED_MAX_ATTEMPTS", 0, 0, maxMaxAttempts, "runs before a failing task is dead (0: retry forever)")
	str(&o.dataDir, "data-dir", "PGSCHED_DATA_DIR", defaultDataDir(filepath.Join(home, ".local", "share", "pgsched", "postgres")), "local PostgreSQL data directory, used without DATABASE_URL")
	str(&o.logFormat, "log-format", "PGSCHED_LOG_FORMAT", "text", "text or json")
	str(&o.recurringFile, "recurring-file", "PGSCHED_RECURRING_FILE", "", "JSON file of recurring schedules to create or update at start")
	boolean(&o.console, "console", "PGSCHED_CONSOLE", true, "serve the web console at /ui/ on -http-addr")
	secret(&o.consoleToken, "console-token", "PGSCHED_CONSOLE_TOKEN", "`token` that enables the console's actions (retry, delete, pause, resume); empty: read-only")
	boolean(&o.migrate, "migrate", "PGSCHED_MIGRATE", true, "apply migrations at start")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.BoolVar(&o.stopLocal, "stop-local", false, "stop the local PostgreSQL in -data-dir (one a worker left running) and exit")
	checks = append(checks,
		func() error {
			if err := sqlschema.Validate(o.schema); err != nil {
				return fmt.Errorf("%s: %w", setting("PGSCHED_SCHEMA", "schema"), err)
			}
			return nil
		},
		func() error { return checkNodeID(o.nodeID) },
		func() error { return checkHTTPAddr(o.httpAddr) },
		func() error {
			if o.logFormat != "text" && o.logFormat != "json" {
				return fmt.Errorf("%s must be text or json, got %q", setting("PGSCHED_LOG_FORMAT", "log-format"), o.logFormat)
			}
			return nil
		},
	)
	check = func() error {
		// A variable that does not parse is reported alone: its setting's
		// range check would only repeat it.
		pending := envErrs
		if len(pending) == 0 {
			pending = checks
		}
		var errs []error
		for _, c := range pending {
			if err := c(); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	return o, fs, check
}

// setting names a setting by its variable and its flag, as every error
// about one does.
func setting(env, name string) string { return env + " (-" + name + ")" }

// fmtDuration formats d as time.Duration does, without zero minutes and
// seconds: 10m rather than 10m0s.
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// secretValue is a string flag whose value is never shown: -h prints a
// set one as "(set)". Connection strings, webhook URLs (user info, paths
// and queries often hold their credential), signing secrets and the
// console token are secretValues.
type secretValue string

func (s *secretValue) String() string {
	if s == nil || *s == "" {
		return ""
	}
	return "(set)"
}

func (s *secretValue) Set(v string) error {
	*s = secretValue(v)
	return nil
}

// checkNodeID refuses a node id PostgreSQL cannot store (invalid UTF-8) or
// that no one could read in a log line or on the console.
func checkNodeID(id string) error {
	rule := fmt.Sprintf("%s must be at most %d bytes of UTF-8 text without control characters", setting("PGSCHED_NODE_ID", "node-id"), maxNodeID)
	switch {
	case len(id) > maxNodeID:
		return fmt.Errorf("%s, got %d bytes", rule, len(id))
	case !utf8.ValidString(id) || strings.ContainsFunc(id, unicode.IsControl):
		return fmt.Errorf("%s, got %q", rule, id)
	}
	return nil
}

// checkHTTPAddr refuses an address net.Listen would take in a way nobody
// means: an empty one or port 0 (a random port nobody can scrape), a
// service name, or a port out of range.
func checkHTTPAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(port)
	if err != nil || perr != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%s must be host:port (host may be empty: every interface) with a port between 1 and 65535, got %q",
			setting("PGSCHED_HTTP_ADDR", "http-addr"), addr)
	}
	return nil
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
		return nil, fmt.Errorf("%s %s: %w", setting("PGSCHED_HTTP_ADDR", "http-addr"), addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, nil
}
