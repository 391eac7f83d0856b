package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/sqlschema"
	"github.com/pgsched/pgsched/internal/webhook"
)

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
	boolean(&o.webhookOutput, "webhook-output", "PGSCHED_WEBHOOK_OUTPUT", false, "keep each 2xx webhook answer's JSON body (up to 64 KiB) as the task's output")
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
