package pgsched

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pgsched/pgsched/internal/execute"
	"github.com/pgsched/pgsched/pgschedtype"

	"github.com/jackc/pgx/v5"
)

// Job is a task as its handler sees it: the type it has from its claim
// on (see pgschedtype), a copy of its own for each run.
type Job = pgschedtype.Job

// Handler runs tasks of one kind. Work returning nil completes the task;
// an error retries it per the kind's RetryPolicy, unless it is Permanent
// (dead at once) or RetryAfter (retried after the delay it names). Work
// must return when ctx is done: the node is stopping, or has lost the
// lease under which it claimed the task (see CheckFence).
type Handler interface {
	Work(ctx context.Context, job *Job) error
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, job *Job) error

// Work calls f.
func (f HandlerFunc) Work(ctx context.Context, job *Job) error { return f(ctx, job) }

// TxHandler runs tasks of one kind inside a transaction that also records
// their completion: the handler's writes and the completion commit
// together or not at all (exactly once for database effects). If the task
// was taken from this node meanwhile (lease lost), the transaction rolls
// back. An error rolls it back too and is treated as Handler's.
type TxHandler interface {
	WorkTx(ctx context.Context, tx pgx.Tx, job *Job) error
}

// TxHandlerFunc adapts a function to a TxHandler.
type TxHandlerFunc func(ctx context.Context, tx pgx.Tx, job *Job) error

// WorkTx calls f.
func (f TxHandlerFunc) WorkTx(ctx context.Context, tx pgx.Tx, job *Job) error { return f(ctx, tx, job) }

// Args is a task's payload as a Go type: it is stored as its JSON encoding
// and names the kind whose handler decodes it. Kind must not depend on the
// value's fields (the zero value's Kind is the kind).
type Args interface {
	Kind() string
}

// NewTask returns a task of args' kind whose payload is args as JSON.
func NewTask(orderingID string, scheduledAt time.Time, args Args) (Task, error) {
	if args == nil {
		return Task{}, fmt.Errorf("%w: NewTask needs args", ErrInvalidTask)
	}
	payload, err := json.Marshal(args)
	if err != nil {
		var uv *json.UnsupportedValueError
		if errors.As(err, &uv) && (uv.Str == "NaN" || uv.Str == "+Inf" || uv.Str == "-Inf") {
			// A float field: JSON has no NaN or infinities, nor has jsonb.
			return Task{}, fieldError(-1, "payload", fmt.Sprintf("cannot hold %s: encoding %T: JSON has no NaN or infinite numbers", uv.Str, args))
		}
		return Task{}, fieldError(-1, "payload", fmt.Sprintf("cannot be encoded as JSON: encoding %T: %v", args, err))
	}
	return Task{OrderingID: orderingID, ScheduledAt: scheduledAt, Kind: args.Kind(), Payload: payload}, nil
}

// KindOf returns the kind of the Args type T, for a handler map's key.
func KindOf[T Args]() string {
	var zero T
	return zero.Kind()
}

// WorkArgs adapts a function taking decoded args to a Handler. A payload
// that does not decode into T fails the task permanently: no retry could
// change it.
func WorkArgs[T Args](f func(ctx context.Context, job *Job, args T) error) Handler {
	return HandlerFunc(func(ctx context.Context, job *Job) error {
		args, err := decodeArgs[T](job)
		if err != nil {
			return err
		}
		return f(ctx, job, args)
	})
}

// WorkArgsTx is WorkArgs for a TxHandler.
func WorkArgsTx[T Args](f func(ctx context.Context, tx pgx.Tx, job *Job, args T) error) TxHandler {
	return TxHandlerFunc(func(ctx context.Context, tx pgx.Tx, job *Job) error {
		args, err := decodeArgs[T](job)
		if err != nil {
			return err
		}
		return f(ctx, tx, job, args)
	})
}

func decodeArgs[T Args](job *Job) (T, error) {
	var args T
	if err := json.Unmarshal(job.Payload, &args); err != nil {
		return args, Permanent(fmt.Errorf("pgsched: payload of kind %q does not decode into %T: %w", job.Kind, args, err))
	}
	return args, nil
}

// Permanent marks a handler error as final: the task becomes dead at once.
func Permanent(err error) error {
	if err == nil {
		err = errors.New("permanent failure")
	}
	return execute.PermanentError{Err: err}
}

// Snooze, returned by a handler, runs the task again after d without
// using an attempt and without recording an error: "not yet" rather than
// "failed". The task stays its ordering_id's head while it waits, so the
// ordering_id's later tasks wait behind it, and a task can snooze any
// number of times (MaxAttempts does not apply). From a TxHandler, its
// transaction is rolled back. A cancel request still ends it.
func Snooze(d time.Duration) error {
	return execute.SnoozeError{After: max(d, 0)}
}

// RetryAfter makes the task retry after d instead of the policy's backoff
// (attempt limits still apply).
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		err = errors.New("retry requested")
	}
	return execute.RetryAfterError{After: max(d, 0), Err: err}
}
