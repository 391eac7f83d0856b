package pgsched

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Job is a task as its handler sees it.
type Job struct {
	ID            int64
	OrderingID    string
	ScheduledAt   time.Time
	UniquenessKey string
	Kind          string
	Payload       json.RawMessage
	// Attempt is 1 on the first run.
	Attempt   int
	Partition int
}

// Handler runs tasks of one kind. Set Func, or TxFunc for a handler whose
// database writes must commit together with the task's completion.
type Handler struct {
	// Func runs the task; nil error completes it.
	Func func(ctx context.Context, job *Job) error
	// TxFunc runs the task inside a transaction that also records its
	// completion: the handler's writes and the completion commit together or
	// not at all (exactly once for database effects). If the task was taken
	// from this node meanwhile (lease lost), the transaction rolls back.
	TxFunc func(ctx context.Context, tx pgx.Tx, job *Job) error
	// Retry overrides Config.Retry for this kind when set.
	Retry *RetryPolicy
}

// HandlerFunc adapts a plain function to a Handler.
func HandlerFunc(f func(ctx context.Context, job *Job) error) Handler { return Handler{Func: f} }

type permanentError struct{ err error }

func (e permanentError) Error() string { return "permanent failure: " + e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks a handler error as final: the task becomes dead at once.
func Permanent(err error) error {
	if err == nil {
		err = errors.New("permanent failure")
	}
	return permanentError{err: err}
}

type retryAfterError struct {
	after time.Duration
	err   error
}

func (e retryAfterError) Error() string {
	return fmt.Sprintf("retry after %s: %v", e.after, e.err)
}
func (e retryAfterError) Unwrap() error { return e.err }

// RetryAfter makes the task retry after d instead of the policy's backoff
// (attempt limits still apply).
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		err = errors.New("retry requested")
	}
	return retryAfterError{after: max(d, 0), err: err}
}
