package pgsched_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
)

// syncLog collects log output written from the worker's goroutines.
type syncLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) lines(substr string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

// TestRetriesLoggedSparingly: a kind that keeps failing shows in the log
// at once, then at most once per ten seconds per kind, not once per retry;
// each kind has its own line; no field is printed twice.
func TestRetriesLoggedSparingly(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	var logs syncLog
	var runs atomic.Int32
	cfg := fastConfig(b.db.Schema)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	fail := func(context.Context, *pgsched.Job) error {
		runs.Add(1)
		return pgsched.RetryAfter(time.Millisecond, errors.New("endpoint down"))
	}
	cfg.Handlers = map[string]pgsched.Handler{"a": pgsched.HandlerFunc(fail), "b": pgsched.HandlerFunc(fail)}
	scheduleNow(t, b, []string{"ra-1", "rb-1"}, func(id string) string { return id[1:2] })
	began := time.Now()
	startWorker(t, b.db, cfg)
	eventually(t, 20*time.Second, func() bool { return runs.Load() >= 40 }, "the tasks keep retrying")
	elapsed := time.Since(began)

	retries := logs.lines("task will retry")
	perKind := 1 + int(elapsed/(10*time.Second))
	for _, kind := range []string{"kind=a ", "kind=b "} {
		n := 0
		for _, l := range retries {
			if strings.Contains(l, kind) {
				n++
			}
		}
		require.GreaterOrEqual(t, n, 1, "%s is logged", kind)
		require.LessOrEqual(t, n, perKind, "%s is logged at most once per 10s, not per retry (%d runs in %s)", kind, runs.Load(), elapsed)
	}
	for _, l := range logs.lines("level=") {
		seen := map[string]bool{}
		for _, f := range strings.Fields(l) {
			if k, _, ok := strings.Cut(f, "="); ok && !strings.Contains(k, "\"") {
				require.False(t, seen[k], "field %s printed twice in %q", k, l)
				seen[k] = true
			}
		}
	}
}
