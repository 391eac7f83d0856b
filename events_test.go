package pgsched_test

import (
	"sync"
	"testing"
	"time"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/pgschedtype"
)

// outcomeLog collects the outcomes a worker records; waitFor wakes on each
// new one instead of polling.
type outcomeLog struct {
	mu      sync.Mutex
	list    []pgsched.Outcome
	changed chan struct{}
}

// watchOutcomes hooks a log into cfg; workers built from it report to it.
func watchOutcomes(cfg *pgsched.WorkerConfig) *outcomeLog {
	l := &outcomeLog{changed: make(chan struct{}, 1)}
	pgsched.SetOnOutcome(cfg, l.record)
	return l
}

// record adds an outcome; several workers may report to one log.
func (l *outcomeLog) record(o pgsched.Outcome) {
	l.mu.Lock()
	l.list = append(l.list, o)
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// count returns how many recorded outcomes have result ("" for any).
func (l *outcomeLog) count(result pgschedtype.Outcome) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, o := range l.list {
		if result == "" || o.Result == result {
			n++
		}
	}
	return n
}

// waitFor waits until cond holds over the outcomes so far, waking on each
// new outcome; it fails the test after within.
func (l *outcomeLog) waitFor(t *testing.T, within time.Duration, cond func(*outcomeLog) bool, msg string, args ...any) {
	t.Helper()
	within = pgtest.Patience(within)
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for !cond(l) {
		select {
		case <-l.changed:
		case <-deadline.C:
			t.Fatalf("not within %s: "+msg, append([]any{within}, args...)...)
		}
	}
}

// completed waits until n outcomes are completions.
func (l *outcomeLog) completed(t *testing.T, n int, within time.Duration) {
	t.Helper()
	l.waitFor(t, within, func(l *outcomeLog) bool { return l.count("completed") >= n }, "%d tasks completed (%d so far)", n, l.count("completed"))
}

// has reports whether a run of orderingID ended with result.
func (l *outcomeLog) has(orderingID string, result pgschedtype.Outcome) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, o := range l.list {
		if o.Key.OrderingID == orderingID && o.Result == result {
			return true
		}
	}
	return false
}
