package pgsched_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
)

// TestKindMetricsShowDepthAndWait: a worker exports the leader's count per
// kind, pgsched_kind_tasks by state and pgsched_kind_oldest_due_seconds,
// so a dashboard sees a paused kind's due tasks pile up and how long the
// oldest has waited; a kind it has no handler for is labelled too (within
// the bound), and the pending total agrees.
func TestKindMetricsShowDepthAndWait(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	_, err := b.client.PauseKind(ctx, "report")
	require.NoError(t, err)
	dueAt := time.Now().Add(-10 * time.Minute)
	for i := range 3 {
		b.db.InsertTask(t, pgtest.TaskRow{OrderingID: fmt.Sprintf("r-%d", i), Kind: "report", State: "pending", ScheduledAt: dueAt.Add(time.Duration(i) * time.Second)})
	}
	b.db.InsertTask(t, pgtest.TaskRow{OrderingID: "r-0", Kind: "report", State: "backlog", ScheduledAt: time.Now().Add(time.Hour)})
	b.db.InsertTask(t, pgtest.TaskRow{OrderingID: "x-1", Kind: "export", State: "dead"})

	cfg := fastConfig(b.db.Schema)
	cfg.CountInterval = 50 * time.Millisecond
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	cfg.Handlers = map[string]pgsched.Handler{
		"report": pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error { return nil }),
	}
	startWorker(t, b.db, cfg)

	gauge := func(name string, labels map[string]string) (float64, bool) {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				found := 0
				for _, l := range m.GetLabel() {
					if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
						found++
					}
				}
				if found == len(labels) {
					return m.GetGauge().GetValue(), true
				}
			}
		}
		return 0, false
	}
	eventually(t, 10*time.Second, func() bool {
		v, ok := gauge("pgsched_kind_tasks", map[string]string{"kind": "report", "state": "due"})
		return ok && v == 3
	}, "the paused kind's 3 due tasks are exported")
	for state, want := range map[string]float64{"pending": 4, "running": 0, "dead": 0} {
		v, _ := gauge("pgsched_kind_tasks", map[string]string{"kind": "report", "state": state})
		require.Equal(t, want, v, "report %s", state)
	}
	wait, ok := gauge("pgsched_kind_oldest_due_seconds", map[string]string{"kind": "report"})
	require.True(t, ok)
	require.GreaterOrEqual(t, wait, 600.0, "the oldest due task has waited ten minutes")
	require.Less(t, wait, 600+pgtest.Patience(time.Minute).Seconds())
	dead, ok := gauge("pgsched_kind_tasks", map[string]string{"kind": "export", "state": "dead"})
	require.True(t, ok, "a kind without a handler here is labelled too")
	require.Equal(t, 1.0, dead)
	exportWait, _ := gauge("pgsched_kind_oldest_due_seconds", map[string]string{"kind": "export"})
	require.Zero(t, exportWait, "nothing of export is due")
	pending, _ := gauge("pgsched_tasks_pending", nil)
	require.Equal(t, 4.0, pending)
}

// TestKindCountWaitsAnIntervalAfterLeading: a node that starts to lead
// counts tasks per kind an Interval later, not at once, so the count's
// read of every task does not land while the nodes catch up with due work
// after a start or a failover. The counter looks once a second, so two
// and a half seconds of leading with an hour's interval would have seen
// a count at once.
func TestKindCountWaitsAnIntervalAfterLeading(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	b.db.InsertTask(t, pgtest.TaskRow{OrderingID: "r-0", Kind: "report", State: "pending", ScheduledAt: time.Now().Add(time.Hour)})
	cfg := fastConfig(b.db.Schema)
	cfg.CountInterval = time.Hour
	startWorker(t, b.db, cfg)
	s := b.db.Schema
	eventually(t, 10*time.Second, func() bool {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+s+".leader").Scan(&n))
		return n == 1
	}, "the worker leads")
	// Polled here, in the test's goroutine (require.Never runs its
	// condition in another, where a failed require cannot stop the test).
	deadline := time.After(2500 * time.Millisecond)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+s+".kind_counted").Scan(&n))
		require.Zero(t, n, "no count within the first interval of leading")
		select {
		case <-deadline:
			return
		case <-tick.C:
		}
	}
}
