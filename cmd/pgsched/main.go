// Command pgsched is the operator's command line for a pgsched
// installation: it shows the cluster, the tasks, the dead tasks, the kinds
// and the recurring schedules, and retries or deletes dead tasks and
// pauses or resumes kinds and schedules.
//
//	pgsched [flags] command [subcommand] [flags] [args]
//
// It runs the SQL functions and reads the views psql users do, so it works
// with the least-privilege roles: <schema>_read sees, <schema>_worker (or
// the schema's owner) acts. Output is an aligned table, or JSON with
// -json. Exit status: 0 done, 1 failed (the database unreachable, an SQL
// error, permission denied), 2 usage error, 3 not found. pgsched help
// lists the commands; docs/cli.md describes them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/store"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// A second signal kills at once.
		<-ctx.Done()
		stop()
	}()
	code := exitCode(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr), os.Stderr)
	stop()
	os.Exit(code)
}

// The exit statuses, for scripts.
const (
	exitOK       = 0
	exitFailed   = 1 // the database unreachable, an SQL error, permission denied
	exitUsage    = 2 // an unknown command or flag, a missing or bad argument
	exitNotFound = 3 // no task, dead task or recurring schedule by that name
)

// usageError is a command line pgsched cannot run: exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// notFoundError: what the command names is not there: exit 3.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }

func notFoundf(format string, args ...any) error { return &notFoundError{fmt.Sprintf(format, args...)} }

// errHelp ends run after printing help: exit 0.
var errHelp = errors.New("help shown")

// exitCode prints err, if any, to stderr and returns the exit status it
// means.
func exitCode(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, errHelp) {
		return exitOK
	}
	fmt.Fprintln(stderr, "pgsched:", err)
	var u *usageError
	var nf *notFoundError
	switch {
	case errors.As(err, &u):
		fmt.Fprintln(stderr, "pgsched help lists the commands and flags")
		return exitUsage
	case errors.As(err, &nf):
		return exitNotFound
	}
	return exitFailed
}

// cli is one invocation: its global flags and, once a command needs it,
// the database.
type cli struct {
	ctx            context.Context
	stdout, stderr io.Writer
	databaseURL    string
	schema         string
	json           bool
	timeout        time.Duration

	pool   *pgxpool.Pool
	client *pgsched.Client
	store  store.Store
}

// command is one of pgsched's commands. setup defines its flags on fs and
// returns what runs it on the arguments left after the flags.
type command struct {
	path    string // "dead retry"
	args    string // what follows the flags in its usage
	summary string
	// acts names who may run it when it changes something ("" for one
	// that only reads), for the permission-denied message.
	acts  string
	setup func(c *cli, fs *flag.FlagSet) func(args []string) error
}

const (
	actsWorker    = "the role <schema>_worker or the schema's owner"
	actsRecurring = "the role <schema>_worker or <schema>_enqueue, or the schema's owner"
)

// commands lists every command in the order help shows them.
var commands []*command

func init() {
	commands = []*command{
		{path: "status", summary: "the cluster (nodes, leader, partitions) and, per kind, pending, due, running, dead and lag", setup: statusCmd},
		{path: "tasks list", summary: "pending and running tasks, by partition and key", setup: tasksListCmd},
		{path: "tasks show", args: "ID|UNIQUENESS_KEY", summary: "the pending, running or dead tasks with that id or uniqueness key, whole", setup: tasksShowCmd},
		{path: "tasks output", args: "ORDERING_ID", summary: "the output a completed task's handler recorded, by key (-scheduled-at, -uniqueness-key)", setup: tasksOutputCmd},
		{path: "dead list", summary: "dead tasks, newest first", setup: deadListCmd},
		{path: "dead show", args: "ID", summary: "one dead task, whole", setup: deadShowCmd},
		{path: "dead retry", args: "[ID...]", summary: "put dead tasks back in line: by id, or those a filter or -all selects", acts: actsWorker, setup: deadRetryCmd},
		{path: "dead delete", args: "[ID...]", summary: "delete dead tasks for good: by id, or those a filter or -all selects", acts: actsWorker, setup: deadDeleteCmd},
		{path: "kinds list", summary: "per kind, pending, due, running and dead as the leader last counted, and whether paused", setup: kindsListCmd},
		{path: "kinds pause", args: "KIND", summary: "stop the cluster from starting tasks of a kind", acts: actsWorker, setup: kindsPauseCmd},
		{path: "kinds resume", args: "KIND", summary: "let the cluster start tasks of a paused kind again", acts: actsWorker, setup: kindsResumeCmd},
		{path: "limits list", summary: "limited kinds: their limits, what runs and started under them, and what waits", setup: limitsListCmd},
		{path: "limits set", args: "KIND", summary: "limit a kind cluster-wide: -max-running, and/or -max-starts per -per", acts: actsWorker, setup: limitsSetCmd},
		{path: "limits clear", args: "KIND", summary: "remove a kind's limit", acts: actsWorker, setup: limitsClearCmd},
		{path: "limits weight", args: "KIND GROUP WEIGHT", summary: "give a group of a kind WEIGHT turns in each round of the kind's fair share (1: the default)", acts: actsWorker, setup: limitsWeightCmd},
		{path: "limits weights", summary: "groups given a weight in their kind's fair share", setup: limitsWeightsCmd},
		{path: "recurring list", summary: "recurring schedules with their next and last tick", setup: recurringListCmd},
		{path: "recurring pause", args: "NAME", summary: "stop a recurring schedule", acts: actsRecurring, setup: recurringPauseCmd},
		{path: "recurring resume", args: "NAME", summary: "start a paused recurring schedule again", acts: actsRecurring, setup: recurringResumeCmd},
		{path: "version", summary: "pgsched's version", setup: versionCmd},
		{path: "help", summary: "this list", setup: helpCmd},
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c := &cli{ctx: ctx, stdout: stdout, stderr: stderr, databaseURL: getenv("DATABASE_URL"), schema: getenv("PGSCHED_SCHEMA"),
		timeout: 30 * time.Second}
	if c.schema == "" {
		c.schema = "pgsched"
	}
	fs := c.flagSet("pgsched")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.usage(stdout)
			return errHelp
		}
		return usagef("%v", err)
	}
	args = fs.Args()
	if len(args) == 0 {
		c.usage(stderr)
		return usagef("no command given")
	}
	cmd, rest := find(args)
	if cmd == nil {
		if group := groupOf(args[0]); group != "" {
			if len(args) == 1 {
				return usagef("%s wants one of: %s", args[0], group)
			}
			return usagef("unknown command %q: %s wants one of: %s", args[0]+" "+args[1], args[0], group)
		}
		return usagef("unknown command %q", strings.Join(args[:min(2, len(args))], " "))
	}
	fs = c.flagSet("pgsched " + cmd.path)
	runCmd := cmd.setup(c, fs)
	pos, err := parseInterleaved(fs, rest)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.commandUsage(cmd, fs)
			return errHelp
		}
		return usagef("%s: %v", cmd.path, err)
	}
	if c.timeout <= 0 {
		return usagef("-timeout must be positive, got %s", c.timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	c.ctx = ctx
	defer func() {
		if c.pool != nil {
			c.pool.Close()
		}
	}()
	if err := runCmd(pos); err != nil {
		return c.explain(cmd, err)
	}
	return nil
}

// find returns the command args start with and the arguments after its
// name.
func find(args []string) (*command, []string) {
	for _, cmd := range commands {
		words := strings.Fields(cmd.path)
		if len(args) >= len(words) && strings.Join(args[:len(words)], " ") == cmd.path {
			return cmd, args[len(words):]
		}
	}
	return nil, nil
}

// groupOf lists the subcommands of group name, "" when it is none.
func groupOf(name string) string {
	var subs []string
	for _, cmd := range commands {
		if g, sub, ok := strings.Cut(cmd.path, " "); ok && g == name {
			subs = append(subs, sub)
		}
	}
	return strings.Join(subs, ", ")
}

// flagSet returns a flag set with the global flags, which every command
// takes too: before the command or after it.
func (c *cli) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// The error is printed once, by main; -h prints the usage to stdout.
	fs.SetOutput(io.Discard)
	fs.Var((*secretValue)(&c.databaseURL), "database-url", "PostgreSQL connection `URL` or key=value string (DATABASE_URL)")
	fs.StringVar(&c.schema, "schema", c.schema, "the schema pgsched was migrated into (PGSCHED_SCHEMA)")
	fs.BoolVar(&c.json, "json", c.json, "print JSON instead of a table")
	fs.DurationVar(&c.timeout, "timeout", c.timeout, "give up on the database after this long")
	return fs
}

// secretValue is a string flag that -h shows only as set or not: the
// connection string may hold a password.
type secretValue string

func (s *secretValue) String() string {
	if s == nil || *s == "" {
		return ""
	}
	return "(set)"
}

func (s *secretValue) Set(v string) error { *s = secretValue(v); return nil }

// parseInterleaved parses fs's flags wherever they stand among args (up to
// a "--", after which everything is an argument) and returns the other
// arguments: pgsched tasks show KEY -json works as pgsched -json tasks
// show KEY does.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var tail []string
	for i, a := range args {
		if a == "--" {
			args, tail = args[:i], args[i+1:]
			break
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return append(pos, tail...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// wantArgs checks a command's argument count.
func wantArgs(cmd string, args []string, n int, what string) error {
	if len(args) != n {
		if n == 0 {
			return usagef("%s takes no arguments, got %q", cmd, args)
		}
		return usagef("%s wants %s, got %d arguments", cmd, what, len(args))
	}
	return nil
}

// open connects the client and the store, once.
func (c *cli) open() error {
	if c.pool != nil {
		return nil
	}
	if c.databaseURL == "" {
		return usagef("no database: set DATABASE_URL or -database-url")
	}
	cfg, err := pgxpool.ParseConfig(c.databaseURL)
	if err != nil {
		return usagef("DATABASE_URL (-database-url) does not parse: %s (the value is not shown: it may hold a password)", parseProblem(err))
	}
	cfg.MaxConns = 2
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "pgsched-cli"
	}
	st, err := store.New(c.schema)
	if err != nil {
		return usagef("-schema (PGSCHED_SCHEMA): %v", err)
	}
	pool, err := pgxpool.NewWithConfig(c.ctx, cfg) // connects at the first statement
	if err != nil {
		return err
	}
	client, err := pgsched.NewClient(pool, pgsched.ClientConfig{Schema: c.schema})
	if err != nil {
		pool.Close()
		return err
	}
	c.pool, c.client, c.store = pool, client, st
	return nil
}

// read runs f in one read-only transaction, so what a command shows comes
// from one snapshot.
func (c *cli) read(f func(tx pgx.Tx) error) error {
	if err := c.open(); err != nil {
		return err
	}
	tx, err := c.pool.BeginTx(c.ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(c.ctx)) }()
	return f(tx)
}

// parseProblem is what is wrong with a connection string, without the
// string (pgx's message quotes it, password and all).
func parseProblem(err error) string {
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return "not a PostgreSQL connection string"
	}
	msg := pe.Error()
	if cause := pe.Unwrap(); cause != nil {
		msg = strings.TrimSuffix(msg, " ("+cause.Error()+")")
	}
	if i := strings.LastIndex(msg, "`: "); i >= 0 && !strings.Contains(msg[i+3:], "`") {
		return msg[i+3:]
	}
	return "not a PostgreSQL connection string"
}

// explain puts a command's error in the operator's terms: a permission
// denied says which role may, a schema not there says so, a database that
// does not answer too.
func (c *cli) explain(cmd *command, err error) error {
	var u *usageError
	var nf *notFoundError
	if errors.As(err, &u) || errors.As(err, &nf) {
		return err
	}
	role := func(s string) string { return strings.ReplaceAll(s, "<schema>", c.schema) }
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42501":
		if cmd.acts != "" {
			return fmt.Errorf("%s: %s: this command acts, which only %s may do (%s may only look)",
				cmd.path, pgErr.Message, role(cmd.acts), role("<schema>_read"))
		}
		return fmt.Errorf("%s: %s: reading needs the role %s, %s or the schema's owner",
			cmd.path, pgErr.Message, role("<schema>_read"), role("<schema>_worker"))
	case errors.As(err, &pgErr) && (pgErr.Code == "3F000" || pgErr.Code == "42P01" || pgErr.Code == "42883"):
		return fmt.Errorf("%s: schema %q is not there or not migrated (%s): run migrate up, or name the schema with -schema",
			cmd.path, c.schema, pgErr.Message)
	case errors.Is(err, pgsched.ErrInvalidTask):
		// Bad input the client refused, naming the field.
		return usagef("%s: %s", cmd.path, strings.TrimPrefix(err.Error(), "pgsched: "))
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: no answer within %s (-timeout): %w", cmd.path, c.timeout, err)
	case store.Unavailable(err):
		return fmt.Errorf("%s: cannot reach the database: %w", cmd.path, err)
	}
	// The client's errors start with "pgsched: " too; once is enough.
	return fmt.Errorf("%s: %s", cmd.path, strings.TrimPrefix(err.Error(), "pgsched: "))
}

func (c *cli) usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: pgsched [flags] command [subcommand] [flags] [args]")
	fmt.Fprintln(w, "\nCommands:")
	for _, cmd := range commands {
		fmt.Fprintf(w, "  %-30s %s\n", strings.TrimSpace(cmd.path+" "+cmd.args), cmd.summary)
	}
	fmt.Fprintln(w, "\nFlags, before or after the command:")
	fs := c.flagSet("pgsched")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintln(w, "\nExit status: 0 done, 1 failed (database, SQL, permission denied), 2 usage error, 3 not found.")
	fmt.Fprintln(w, "Reading needs the role <schema>_read (or _worker, or the owner); acting needs <schema>_worker or the owner.")
	fmt.Fprintln(w, "pgsched COMMAND -h shows a command's flags.")
}

func (c *cli) commandUsage(cmd *command, fs *flag.FlagSet) {
	fmt.Fprintf(c.stdout, "Usage: %s\n\n%s.\n", strings.TrimSpace("pgsched "+cmd.path+" [flags] "+cmd.args), cmd.summary)
	if cmd.acts != "" {
		fmt.Fprintf(c.stdout, "It acts: it needs %s.\n", strings.ReplaceAll(cmd.acts, "<schema>", c.schema))
	}
	fmt.Fprintln(c.stdout, "\nFlags:")
	fs.SetOutput(c.stdout)
	fs.PrintDefaults()
}

func versionCmd(c *cli, _ *flag.FlagSet) func([]string) error {
	return func(args []string) error {
		if err := wantArgs("version", args, 0, ""); err != nil {
			return err
		}
		if c.json {
			return writeJSON(c.stdout, map[string]string{"version": pgsched.Version(), "go": runtime.Version()})
		}
		_, err := fmt.Fprintln(c.stdout, "pgsched", pgsched.Version(), runtime.Version())
		return err
	}
}

func helpCmd(c *cli, _ *flag.FlagSet) func([]string) error {
	return func([]string) error {
		c.usage(c.stdout)
		return nil
	}
}
