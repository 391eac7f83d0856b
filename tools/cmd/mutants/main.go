// Command mutants checks that pgsched's test suite notices when a promise
// of the README breaks: `make mutants`.
//
// A test suite that passes says little by itself: a test that never
// exercises the fence, or checks the wrong thing, passes too. So the
// project keeps a list of mutations (tools/mutants/mutations.txt), each a
// small, deliberate bug that breaks one guarantee of the README's
// "Guarantees and limits" (a fence check removed, an order reversed, a
// grant left out), with the tests expected to fail because of it. This
// command copies the working tree into scratch directories, runs the
// selected tests once unmutated (they must pass, or every mutant would
// look caught), then, for each mutation, makes its edit, runs its tests
// and puts the file back. A mutation is
//
//   - CAUGHT when a selected test fails (the table names it);
//   - SURVIVED when they all pass: a guarantee the suite does not pin;
//   - NOT APPLIED when its old text is not in its file exactly once (the
//     code moved on: update the list);
//   - BUILD FAILED when the mutant does not compile (a broken mutation,
//     not a catch).
//
// It prints a table (guarantee, mutation, what it breaks, result) and
// exits 1 unless every mutation was caught. Every guarantee of the README
// must have a mutation, and every mutation must name one of them.
//
// Tests need PostgreSQL: TEST_DATABASE_URL when set, else a private
// server started from the machine's binaries for the run (as the tests
// themselves would start one per test binary). scripts/mutants.sh installs
// the binaries when missing. See docs/mutants.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pgsched/pgsched/internal/localpg"
	"github.com/pgsched/pgsched/tools/internal/rootmodule"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	switch {
	case errors.Is(err, errNotCaught):
		os.Exit(1)
	case err != nil:
		fmt.Fprintln(os.Stderr, "mutants:", err)
		os.Exit(1)
	}
}

// errNotCaught: the run went through and some mutation was not caught.
var errNotCaught = errors.New("not every mutation was caught")

type options struct {
	list      bool
	only      map[string]bool
	jobs      int
	race      bool
	timeout   time.Duration
	mutations string
	logs      string
	markdown  string
	keep      bool
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("mutants", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.list, "list", false, "print the mutations and whether each applies to the working tree, run nothing")
	only := fs.String("only", "", "comma-separated mutation ids to run (default: all)")
	fs.IntVar(&o.jobs, "j", 2, "mutations tested at once, each in a scratch copy of its own")
	fs.BoolVar(&o.race, "race", false, "run the tests with the race detector (slower; catches nothing more here)")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "go test -timeout for each run, unless the mutation sets its own")
	fs.StringVar(&o.mutations, "mutations", "", "the mutation list (default: tools/mutants/mutations.txt of the repository)")
	fs.StringVar(&o.logs, "logs", "", "directory for each run's go test output (default: a new temporary directory, kept)")
	fs.StringVar(&o.markdown, "markdown", "", "also write the result table, in Markdown, to this file")
	fs.BoolVar(&o.keep, "keep", false, "keep the scratch copies")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.jobs < 1 {
		return o, errors.New("-j must be at least 1")
	}
	if *only != "" {
		o.only = map[string]bool{}
		for _, id := range strings.Split(*only, ",") {
			if id = strings.TrimSpace(id); id != "" {
				o.only[id] = true
			}
		}
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	o, err := parseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	root, err := rootmodule.Dir()
	if err != nil {
		return err
	}
	if o.mutations == "" {
		o.mutations = filepath.Join(root, "tools", "mutants", "mutations.txt")
	}
	all, err := readMutations(o.mutations)
	if err != nil {
		return err
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		return err
	}
	guarantees, err := readmeGuarantees(readme)
	if err != nil {
		return err
	}
	if err := checkCoverage(all, guarantees); err != nil {
		return fmt.Errorf("%s: %w", o.mutations, err)
	}
	ms, err := selectMutations(all, o.only)
	if err != nil {
		return err
	}
	if o.list {
		return list(stdout, root, ms)
	}

	if o.logs == "" {
		if o.logs, err = os.MkdirTemp("", "pgsched-mutants-logs-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(o.logs, 0o755); err != nil {
		return err
	}
	dbURL, stopDB, err := database(ctx, log)
	if err != nil {
		return err
	}
	defer stopDB()

	start := time.Now()
	s, err := newSession(ctx, root, o, dbURL, log)
	if err != nil {
		return err
	}
	defer s.cleanup()
	if err := s.baseline(ctx, ms); err != nil {
		return err
	}
	results := s.mutate(ctx, ms)
	if err := ctx.Err(); err != nil {
		return err
	}
	elapsed := time.Since(start).Round(time.Second)
	printTable(stdout, results)
	caught := 0
	for _, r := range results {
		if r.Status == statusCaught {
			caught++
		}
	}
	fmt.Fprintf(stdout, "\n%d of %d mutations caught in %s (-j %d, race %t); logs in %s\n",
		caught, len(results), elapsed, o.jobs, o.race, o.logs)
	if o.markdown != "" {
		if err := os.WriteFile(o.markdown, []byte(markdownTable(results, start, elapsed, o)), 0o644); err != nil {
			return err
		}
	}
	if caught != len(results) {
		return errNotCaught
	}
	return nil
}

// selectMutations keeps the mutations -only names (all without it).
func selectMutations(all []mutation, only map[string]bool) ([]mutation, error) {
	if only == nil {
		return all, nil
	}
	var out []mutation
	known := map[string]bool{}
	for _, m := range all {
		known[m.ID] = true
		if only[m.ID] {
			out = append(out, m)
		}
	}
	for id := range only {
		if !known[id] {
			return nil, fmt.Errorf("-only: no mutation %q", id)
		}
	}
	return out, nil
}

// database returns the URL tests are to use: TEST_DATABASE_URL, or a
// private server's, started for this run (crash safety off, as the
// tests' own would be) and stopped by the returned function.
func database(ctx context.Context, log *slog.Logger) (string, func(), error) {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "pgsched-mutants-pg-")
	if err != nil {
		return "", nil, err
	}
	// As root the server runs as user postgres, which must reach the
	// data directory.
	_ = os.Chmod(dir, 0o755)
	srv, err := localpg.Start(ctx, localpg.Options{DataDir: filepath.Join(dir, "data"),
		Logger: log.With("component", "localpg")})
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, fmt.Errorf("starting a PostgreSQL server (or set TEST_DATABASE_URL): %w", err)
	}
	log.Info("PostgreSQL: private server for this run", "url", srv.URL())
	return srv.URL(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			log.Warn("stopping the PostgreSQL server", "error", err)
		}
		_ = os.RemoveAll(dir)
	}, nil
}
