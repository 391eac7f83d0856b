// Package observe turns what happens to tasks on a node into its metrics,
// the throughput history (internal/stats) and its logs. The dispatcher and
// the executor report to a Tasks: every task claimed (or handed over),
// every first attempt started, every outcome settled (recorded, or
// fenced), every task given back by a reconcile.
package observe

import (
	"log/slog"
	"time"

	"github.com/pgsched/pgsched/internal/dispatch"
	"github.com/pgsched/pgsched/internal/metrics"
	"github.com/pgsched/pgsched/internal/stats"
	"github.com/pgsched/pgsched/pgschedtype"
)

// Tasks observes a node's tasks.
type Tasks struct {
	Metrics *metrics.Metrics
	Stats   *stats.Recorder
	Logger  *slog.Logger
	// Settled, when set, is told of every settled outcome too (tests).
	Settled func(job *dispatch.Job, res dispatch.Result)
	retries retryLog
}

// Hooks are the dispatcher's hooks reporting to t.
func (t *Tasks) Hooks() dispatch.Hooks {
	return dispatch.Hooks{Claimed: t.Claimed, Finished: t.Finished, Reconciled: t.Reconciled}
}

// Claimed counts a task claimed or handed over to the node.
func (t *Tasks) Claimed(job *dispatch.Job) {
	t.Metrics.Claimed.Inc()
	if job.HandedOver {
		t.Metrics.HandedOver.Inc()
	}
	t.Metrics.Running.Inc()
}

// Started records a first attempt's start lateness.
func (t *Tasks) Started(job *dispatch.Job, lateness time.Duration) {
	t.Stats.Started(lateness)
	late := max(lateness.Seconds(), 0)
	t.Metrics.Lateness.Observe(late)
	if job.Tick {
		t.Metrics.RecurringLateness.Observe(late)
	}
}

// Finished records a settled outcome: counted, timed, and logged when
// the task retries (at most one line per kind every few seconds) or died.
func (t *Tasks) Finished(job *dispatch.Job, res dispatch.Result, ran time.Duration) {
	if t.Settled != nil {
		t.Settled(job, res)
	}
	t.Metrics.Running.Dec()
	t.Stats.Outcome(res.Outcome)
	t.Metrics.Executed.WithLabelValues(job.Kind, string(res.Outcome)).Inc()
	t.Metrics.Duration.WithLabelValues(job.Kind).Observe(ran.Seconds())
	switch res.Outcome {
	case pgschedtype.OutcomeRetry:
		t.Metrics.Retried.WithLabelValues(job.Kind).Inc()
		t.retries.log(t.Logger, t.Metrics.Kinds.Label(job.Kind), job, res)
	case pgschedtype.OutcomeDead:
		t.Metrics.Dead.WithLabelValues(job.Kind).Inc()
		t.Logger.Warn("task is dead", "ordering_id", job.OrderingID, "task_id", job.ID, "kind", job.Kind,
			"attempt", job.Attempt, "error", res.Error)
	}
}

// Reconciled counts tasks given back after a lost response.
func (t *Tasks) Reconciled(n int) { t.Metrics.Reconciled.Add(float64(n)) }
