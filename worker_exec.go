package pgsched

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/pgsched/pgsched/internal/dispatch"
	"github.com/pgsched/pgsched/internal/store"
)

func (w *Worker) onClaimed(job *dispatch.Job) {
	w.metrics.Claimed.Inc()
	if job.HandedOver {
		w.metrics.HandedOver.Inc()
	}
	w.metrics.Running.Inc()
}

func (w *Worker) onFinished(job *dispatch.Job, res dispatch.Result, ran time.Duration) {
	if f := w.cfg.onOutcome; f != nil {
		f(Outcome{Key: Key{OrderingID: job.OrderingID, ScheduledAt: job.ScheduledAt, UniquenessKey: job.UniquenessKey},
			ID: job.ID, Kind: job.Kind, Attempt: job.Attempt, Result: res.Outcome})
	}
	w.metrics.Running.Dec()
	w.stats.Outcome(res.Outcome)
	w.metrics.Executed.WithLabelValues(job.Kind, res.Outcome).Inc()
	w.metrics.Duration.WithLabelValues(job.Kind).Observe(ran.Seconds())
	switch res.Outcome {
	case store.OutcomeRetry:
		w.metrics.Retried.WithLabelValues(job.Kind).Inc()
		w.retries.log(w.logger, w.metrics.Kinds.Label(job.Kind), job, res)
	case store.OutcomeDead:
		w.metrics.Dead.WithLabelValues(job.Kind).Inc()
		w.logger.Warn("task is dead", "ordering_id", job.OrderingID, "task_id", job.ID, "kind", job.Kind,
			"attempt", job.Attempt, "error", res.Error)
	}
}

func (w *Worker) handlerFor(kind string) (kindHandler, bool) {
	if h, ok := w.kinds[kind]; ok {
		return h, true
	}
	h, ok := w.kinds["*"]
	return h, ok
}

// exec runs a job's handler and turns its error into an outcome.
func (w *Worker) exec(ctx context.Context, dj *dispatch.Job) dispatch.Result {
	if dj.Attempt == 1 {
		lateness := dj.StartLateness()
		w.stats.Started(lateness)
		late := max(lateness.Seconds(), 0)
		w.metrics.Lateness.Observe(late)
		if strings.HasPrefix(dj.UniquenessKey, "tick ") {
			w.metrics.RecurringLateness.Observe(late)
		}
	}
	job := new(Job)
	*job = dj.Claimed // the handler's own copy: what it changes, changes nothing
	h, ok := w.handlerFor(job.Kind)
	policy := w.cfg.Retry
	if ok {
		policy = h.retry
	}
	var err error
	switch {
	case !ok:
		err = fmt.Errorf("%w %q", ErrNoHandler, job.Kind)
	case h.tx != nil:
		recorded, txErr := w.execTx(ctx, dj, job, h.tx)
		if txErr == nil && recorded {
			return dispatch.Result{Outcome: store.OutcomeCompleted, Recorded: true}
		}
		err = txErr
		if err == nil {
			// Committed nothing: the task is no longer ours.
			return dispatch.Result{Outcome: store.OutcomeRelease}
		}
	default:
		err = h.work.Work(ctx, job)
	}
	if err == nil {
		return dispatch.Result{Outcome: store.OutcomeCompleted}
	}
	return w.failure(job, policy, err)
}

func (w *Worker) failure(job *Job, policy RetryPolicy, err error) dispatch.Result {
	msg := err.Error()
	var perm permanentError
	if errors.As(err, &perm) {
		return dispatch.Result{Outcome: store.OutcomeDead, Error: msg}
	}
	if policy.MaxAttempts > 0 && job.Attempt >= policy.MaxAttempts {
		return dispatch.Result{Outcome: store.OutcomeDead, Error: fmt.Sprintf("attempt %d of %d: %s", job.Attempt, policy.MaxAttempts, msg)}
	}
	delay := policy.Backoff(job.Attempt, rand.Float64())
	var ra retryAfterError
	if errors.As(err, &ra) {
		delay = ra.after
	}
	return dispatch.Result{Outcome: store.OutcomeRetry, RetryIn: delay, Error: msg}
}

// execTx runs a transactional handler and records completion in its
// transaction. recorded is false when the task was no longer held by this
// node's term, in which case nothing was committed.
func (w *Worker) execTx(ctx context.Context, dj *dispatch.Job, job *Job, h TxHandler) (recorded bool, err error) {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("beginning handler transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := h.WorkTx(ctx, tx, job); err != nil {
		return false, err
	}
	if ok, err := w.dispatcher.RecordCompletedTx(ctx, tx, dj); !ok || err != nil {
		return false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("committing handler transaction: %w", err)
	}
	// Counted by the dispatcher's Finished hook, like every outcome.
	return true, nil
}
