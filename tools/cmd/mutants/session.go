package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

type status string

const (
	statusCaught      status = "CAUGHT"
	statusSurvived    status = "SURVIVED"
	statusNotApplied  status = "NOT APPLIED"
	statusBuildFailed status = "BUILD FAILED"
	statusError       status = "ERROR"
)

// result is what became of one mutation.
type result struct {
	M        mutation
	Status   status
	CaughtBy []string // failing top-level tests (or "timeout in TestX")
	Detail   string   // why it is not CAUGHT, when it is not
	Elapsed  time.Duration
	Log      string
}

// session holds the scratch copies: one per job slot, so mutations tested
// at once never see each other's edits.
type session struct {
	o       options
	env     []string
	log     *slog.Logger
	scratch string
	dirs    []string
}

func newSession(ctx context.Context, root string, o options, dbURL string, log *slog.Logger) (*session, error) {
	files, err := trackedFiles(ctx, root)
	if err != nil {
		return nil, err
	}
	scratch, err := os.MkdirTemp("", "pgsched-mutants-")
	if err != nil {
		return nil, err
	}
	s := &session{o: o, env: testEnv(dbURL), log: log, scratch: scratch}
	for i := range o.jobs {
		dir := filepath.Join(scratch, fmt.Sprintf("w%d", i))
		if err := copyTree(root, dir, files); err != nil {
			s.cleanup()
			return nil, fmt.Errorf("copying the working tree: %w", err)
		}
		s.dirs = append(s.dirs, dir)
	}
	log.Info("working tree copied", "files", len(files), "copies", o.jobs, "scratch", scratch)
	return s, nil
}

func (s *session) cleanup() {
	if s.o.keep {
		s.log.Info("scratch copies kept", "dir", s.scratch)
		return
	}
	_ = os.RemoveAll(s.scratch)
}

// parallel runs job(dir, i) for i in [0, n), at most one per scratch copy
// at a time, and stops handing out jobs once ctx ends.
func (s *session) parallel(ctx context.Context, n int, job func(dir string, i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for _, dir := range s.dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				job(dir, i)
			}
		}()
	}
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
}

// baseline runs, unmutated, every test some mutation selects (one go test
// per package) and fails unless they all pass and every selection names a
// test that exists: else a mutant would look caught by a test that fails
// anyway, or survive because its selection runs nothing.
func (s *session) baseline(ctx context.Context, ms []mutation) error {
	var pkgs []string
	patterns := map[string][]string{}
	for _, m := range ms {
		for _, t := range m.Tests {
			if !slices.Contains(pkgs, t.Pkg) {
				pkgs = append(pkgs, t.Pkg)
			}
			if !slices.Contains(patterns[t.Pkg], t.Run) {
				patterns[t.Pkg] = append(patterns[t.Pkg], t.Run)
			}
		}
	}
	s.log.Info("running the selected tests on the unmutated tree", "packages", len(pkgs))
	runs := make([]testRun, len(pkgs))
	errs := make([]error, len(pkgs))
	s.parallel(ctx, len(pkgs), func(dir string, i int) {
		pkg := pkgs[i]
		sel := selection{Pkg: pkg, Run: "(" + strings.Join(patterns[pkg], ")|(") + ")"}
		timeout := s.o.timeout
		for _, m := range ms {
			timeout = max(timeout, m.Timeout)
		}
		r, err := goTest(ctx, dir, sel, s.o, timeout*2, s.env)
		runs[i], errs[i] = r, err
		logFile := filepath.Join(s.o.logs, "baseline-"+logName(pkg)+".log")
		if werr := os.WriteFile(logFile, r.Output, 0o644); werr != nil && err == nil {
			errs[i] = werr
		}
		s.log.Info("baseline", "package", pkg, "tests", len(r.Ran), "passed", r.Passed && err == nil,
			"elapsed", r.Elapsed.Round(time.Second))
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	var problems []error
	for i, pkg := range pkgs {
		r := runs[i]
		logFile := filepath.Join(s.o.logs, "baseline-"+logName(pkg)+".log")
		switch {
		case errs[i] != nil:
			problems = append(problems, fmt.Errorf("%s: %w (log: %s)", pkg, errs[i], logFile))
		case r.BuildFailed:
			problems = append(problems, fmt.Errorf("%s: does not build unmutated (log: %s)", pkg, logFile))
		case !r.Passed:
			what := strings.Join(r.Failed, ", ")
			if len(r.TimedOut) > 0 {
				what = "timed out in " + strings.Join(r.TimedOut, ", ")
			}
			problems = append(problems, fmt.Errorf("%s: fails unmutated: %s (log: %s)", pkg, what, logFile))
		}
	}
	for _, m := range ms {
		for _, t := range m.Tests {
			r := runs[slices.Index(pkgs, t.Pkg)]
			if !r.Passed || slices.IndexFunc(r.Ran, func(name string) bool { return matches(t.Run, name) }) >= 0 {
				continue
			}
			problems = append(problems, fmt.Errorf("mutation %s: %s -run %q selects no test", m.ID, t.Pkg, t.Run))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the unmutated tree does not pass the selected tests, so no mutation can be judged:\n  %w",
			errors.Join(problems...))
	}
	return nil
}

// mutate tests every mutation and returns the results in list order.
func (s *session) mutate(ctx context.Context, ms []mutation) []result {
	results := make([]result, len(ms))
	var (
		mu   sync.Mutex
		done int
	)
	s.parallel(ctx, len(ms), func(dir string, i int) {
		r := s.one(ctx, dir, ms[i])
		if ctx.Err() != nil {
			return
		}
		results[i] = r
		mu.Lock()
		done++
		n := done
		mu.Unlock()
		line := string(r.Status)
		if len(r.CaughtBy) > 0 {
			line += " by " + strings.Join(r.CaughtBy, ", ")
		}
		if r.Detail != "" {
			line += ": " + r.Detail
		}
		s.log.Info(fmt.Sprintf("[%d/%d] %s", n, len(ms), ms[i].ID), "result", line, "elapsed", r.Elapsed.Round(time.Second))
	})
	return results
}

// one applies m in dir, runs its tests and puts the files back.
func (s *session) one(ctx context.Context, dir string, m mutation) (res result) {
	res = result{M: m, Log: filepath.Join(s.o.logs, m.ID+".log")}
	start := time.Now()
	defer func() { res.Elapsed = time.Since(start) }()
	restore, err := apply(dir, m)
	if err != nil {
		res.Status, res.Detail = statusNotApplied, err.Error()
		if !errors.Is(err, errNotApplied) {
			res.Status = statusError
		}
		return res
	}
	defer func() {
		if err := restore(); err != nil {
			// The copy is no longer the tree: nothing after this is sound.
			res.Status, res.Detail = statusError, "restoring the files: "+err.Error()
		}
	}()
	timeout := s.o.timeout
	if m.Timeout > 0 {
		timeout = m.Timeout
	}
	var logText strings.Builder
	var failedNoName bool
	for _, sel := range m.Tests {
		r, err := goTest(ctx, dir, sel, s.o, timeout, s.env)
		fmt.Fprintf(&logText, "=== mutants: go test -run %q %s (%s)\n", sel.Run, sel.Pkg, r.Elapsed.Round(time.Second))
		logText.Write(r.Output)
		switch {
		case err != nil:
			res.Status, res.Detail = statusError, err.Error()
		case r.BuildFailed:
			res.Status, res.Detail = statusBuildFailed, "the mutant of "+sel.Pkg+" does not compile; fix the mutation"
		case !r.Passed:
			res.CaughtBy = append(res.CaughtBy, r.Failed...)
			for _, t := range r.TimedOut {
				res.CaughtBy = append(res.CaughtBy, "timeout in "+t)
			}
			if len(r.Failed) == 0 && len(r.TimedOut) == 0 {
				failedNoName = true
			}
		}
		if res.Status != "" {
			break
		}
	}
	if werr := os.WriteFile(res.Log, []byte(logText.String()), 0o644); werr != nil && res.Status == "" {
		res.Status, res.Detail = statusError, werr.Error()
	}
	switch {
	case res.Status != "":
		res.CaughtBy = nil
	case len(res.CaughtBy) > 0:
		res.Status = statusCaught
	case failedNoName:
		res.Status = statusCaught
		res.CaughtBy = []string{"a test binary exiting non-zero (no --- FAIL line; see the log)"}
	default:
		res.Status = statusSurvived
		res.Detail = "every selected test passed"
	}
	return res
}

// logName turns a package path into a file name.
func logName(pkg string) string {
	name := strings.Trim(strings.ReplaceAll(pkg, "/", "_"), "._")
	if name == "" {
		return "root"
	}
	return name
}
