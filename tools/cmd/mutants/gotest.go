package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"
)

// testRun is how one go test invocation ended.
type testRun struct {
	Passed      bool     // exit status 0
	BuildFailed bool     // the package or its tests did not compile
	Failed      []string // top-level tests with a "--- FAIL:" line, in order
	Ran         []string // top-level tests started ("=== RUN")
	TimedOut    []string // tests running when -timeout panicked the binary
	Panicked    bool     // the binary panicked outside a test's failure report
	Output      []byte
	Elapsed     time.Duration
}

// goTest runs the tests of sel in dir: go test -v (so the tests that ran
// are known), without vet (a test suite is measured, not go vet), with
// -trimpath so that every scratch copy shares one build cache.
func goTest(ctx context.Context, dir string, sel selection, o options, timeout time.Duration, env []string) (testRun, error) {
	args := []string{"test", "-count=1", "-vet=off", "-trimpath", "-v",
		"-timeout", timeout.String(), "-run", sel.Run}
	if o.race {
		args = append(args, "-race")
	}
	args = append(args, sel.Pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	start := time.Now()
	err := runGroup(ctx, cmd, timeout+time.Minute)
	r := parseTestOutput(out.Bytes())
	r.Elapsed = time.Since(start)
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		r.Passed = true
	case errors.As(err, &exit):
	default:
		return r, fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	return r, nil
}

var (
	failLine     = regexp.MustCompile(`^--- FAIL: (\S+) `)
	runLine      = regexp.MustCompile(`^=== RUN\s+(\S+)$`)
	buildFailed  = regexp.MustCompile(`(?m)^FAIL\s+\S+ \[(build|setup) failed\]$`)
	timeoutPanic = regexp.MustCompile(`(?m)^panic: test timed out after`)
)

// parseTestOutput reads go test -v's output.
func parseTestOutput(out []byte) testRun {
	r := testRun{Output: out}
	r.BuildFailed = buildFailed.Match(out)
	timedOut := timeoutPanic.Match(out)
	inRunning := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := failLine.FindStringSubmatch(line); m != nil && !strings.Contains(m[1], "/") {
			if !slices.Contains(r.Failed, m[1]) {
				r.Failed = append(r.Failed, m[1])
			}
		}
		if m := runLine.FindStringSubmatch(line); m != nil && !strings.Contains(m[1], "/") {
			r.Ran = append(r.Ran, m[1])
		}
		if strings.HasPrefix(line, "panic: ") && !timedOut {
			r.Panicked = true
		}
		// After a -timeout panic, go test lists the tests still running:
		// "running tests:" then "\tTestX (5m0s)".
		if timedOut && strings.TrimSpace(line) == "running tests:" {
			inRunning = true
			continue
		}
		if inRunning {
			f := strings.Fields(line)
			if len(f) == 0 || !strings.HasPrefix(line, "\t") {
				inRunning = false
				continue
			}
			if name, _, _ := strings.Cut(f[0], "/"); !slices.Contains(r.TimedOut, name) {
				r.TimedOut = append(r.TimedOut, name)
			}
		}
	}
	if timedOut && len(r.TimedOut) == 0 {
		r.TimedOut = []string{"(unknown test)"}
	}
	return r
}

// matches reports whether a -run pattern naming top-level tests selects
// the test name.
func matches(pattern, name string) bool {
	re, err := regexp.Compile(pattern)
	return err == nil && re.MatchString(name)
}

// testEnv is the environment of every go test run: this process's, with
// the database URL the tests are to use.
func testEnv(dbURL string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "TEST_DATABASE_URL=")
	})
	return append(env, "TEST_DATABASE_URL="+dbURL)
}
