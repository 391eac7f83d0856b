// Package execute runs a claimed task's handler and says what became of
// it: the middle of a task's path, between the dispatcher that claims and
// queues (internal/dispatch) and the finisher that records outcomes in
// batches (also there).
//
// It finds the kind's handler (or the catch-all "*"), runs it, and turns
// its return into an outcome: nil completes; an error retries after the
// kind's RetryPolicy backoff, or after the delay a RetryAfter names,
// unless it is Permanent or the attempts are used up (dead). A kind
// without a handler fails like any error (ErrNoHandler), so it retries or
// dies per policy and is never silently dropped. A transactional handler
// runs in a transaction that records the completion too (Record), so its
// writes and the completion commit together or not at all.
package execute

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgsched/pgsched/internal/dispatch"
	"github.com/pgsched/pgsched/pgschedtype"
)

// ErrNoHandler is the failure recorded for a task whose kind has no
// handler.
var ErrNoHandler = errors.New("pgsched: no handler for kind")

// Handler runs tasks (pgsched.Handler).
type Handler interface {
	Work(ctx context.Context, job *pgschedtype.Job) error
}

// TxHandler runs tasks inside a transaction (pgsched.TxHandler).
type TxHandler interface {
	WorkTx(ctx context.Context, tx pgx.Tx, job *pgschedtype.Job) error
}

// Kind is how one kind's tasks run: Work or Tx, and its retry policy.
type Kind struct {
	Work  Handler
	Tx    TxHandler
	Retry pgschedtype.RetryPolicy
}

// Config configures an Executor.
type Config struct {
	// Kinds by kind; "*" serves every kind without an entry of its own.
	Kinds map[string]Kind
	// Retry is the policy of a kind with no handler.
	Retry pgschedtype.RetryPolicy
	// Pool runs transactional handlers' transactions.
	Pool *pgxpool.Pool
	// Record records a transactional handler's completion, with its
	// output (nil for none), inside its transaction; false means the task
	// is no longer this node's (nothing must commit). The finisher's
	// RecordCompletedTx.
	Record func(ctx context.Context, tx pgx.Tx, job *dispatch.Job, output []byte) (bool, error)
	// MaxOutput bounds a handler's output (Job.RecordOutput) in bytes; a
	// larger one fails its run for good.
	MaxOutput int
	// Started is told of each first attempt about to run, with its start
	// lateness (metrics, the throughput history). May be nil.
	Started func(job *dispatch.Job, lateness time.Duration)
}

// Executor runs handlers.
type Executor struct{ cfg Config }

// New returns an Executor.
func New(cfg Config) *Executor { return &Executor{cfg: cfg} }

func (e *Executor) kind(name string) (Kind, bool) {
	if k, ok := e.cfg.Kinds[name]; ok {
		return k, true
	}
	k, ok := e.cfg.Kinds["*"]
	return k, ok
}

// Run runs a job's handler and turns its error into an outcome.
func (e *Executor) Run(ctx context.Context, dj *dispatch.Job) dispatch.Result {
	if dj.Attempt == 1 && e.cfg.Started != nil {
		e.cfg.Started(dj, dj.StartLateness())
	}
	job := new(pgschedtype.Job)
	*job = *dj.Claimed // the handler's own copy: what it changes, changes nothing
	k, ok := e.kind(job.Kind)
	policy := e.cfg.Retry
	if ok {
		policy = k.Retry
	}
	var err error
	switch {
	case !ok:
		err = fmt.Errorf("%w %q", ErrNoHandler, job.Kind)
	case k.Tx != nil:
		recorded, txErr := e.runTx(ctx, dj, job, k.Tx)
		if txErr == nil && recorded {
			return dispatch.Result{Outcome: pgschedtype.OutcomeCompleted, Recorded: true, Output: job.Output()}
		}
		if err = txErr; err == nil {
			// Committed nothing: the task is no longer ours.
			return dispatch.Result{Outcome: pgschedtype.OutcomeRelease}
		}
	default:
		err = k.Work.Work(ctx, job)
	}
	if err == nil {
		if err = e.outputProblem(job); err == nil {
			return dispatch.Result{Outcome: pgschedtype.OutcomeCompleted, Output: job.Output()}
		}
	}
	return Failure(job.Attempt, policy, err)
}

// Failure is the outcome of a run that returned err: a snooze when the
// handler asked for one (no attempt used, no error recorded), dead for a
// permanent failure or once the attempts are used up, else a retry after
// the policy's backoff or the delay RetryAfter names.
func Failure(attempt int, policy pgschedtype.RetryPolicy, err error) dispatch.Result {
	var snooze SnoozeError
	if errors.As(err, &snooze) {
		return dispatch.Result{Outcome: pgschedtype.OutcomeSnooze, RetryIn: max(snooze.After, 0)}
	}
	msg := err.Error()
	var perm PermanentError
	if errors.As(err, &perm) {
		return dispatch.Result{Outcome: pgschedtype.OutcomeDead, Error: msg}
	}
	if policy.MaxAttempts > 0 && attempt >= policy.MaxAttempts {
		return dispatch.Result{Outcome: pgschedtype.OutcomeDead, Error: fmt.Sprintf("attempt %d of %d: %s", attempt, policy.MaxAttempts, msg)}
	}
	delay := policy.Backoff(attempt, rand.Float64())
	var ra RetryAfterError
	if errors.As(err, &ra) {
		delay = ra.After
	}
	return dispatch.Result{Outcome: pgschedtype.OutcomeRetry, RetryIn: delay, Error: msg}
}

// runTx runs a transactional handler and records completion in its
// transaction. recorded is false when the task was no longer held by this
// node's term, in which case nothing was committed.
func (e *Executor) runTx(ctx context.Context, dj *dispatch.Job, job *pgschedtype.Job, h TxHandler) (recorded bool, err error) {
	tx, err := e.cfg.Pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("beginning handler transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := h.WorkTx(ctx, tx, job); err != nil {
		return false, err
	}
	if err := e.outputProblem(job); err != nil {
		return false, err
	}
	if ok, err := e.cfg.Record(ctx, tx, dj, job.Output()); !ok || err != nil {
		return false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("committing handler transaction: %w", err)
	}
	return true, nil
}

// outputProblem fails a run whose handler recorded an output over
// MaxOutput: a permanent failure, as running it again records the same.
func (e *Executor) outputProblem(job *pgschedtype.Job) error {
	if n := len(job.Output()); n > e.cfg.MaxOutput && e.cfg.MaxOutput > 0 {
		return PermanentError{Err: fmt.Errorf("the handler recorded an output of %d bytes, over the worker's MaxOutputBytes (%d)", n, e.cfg.MaxOutput)}
	}
	return nil
}
