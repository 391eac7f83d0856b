package execute

import (
	"fmt"
	"time"
)

// PermanentError marks a handler error as final: the task becomes dead at
// once (pgsched.Permanent).
type PermanentError struct{ Err error }

func (e PermanentError) Error() string { return "permanent failure: " + e.Err.Error() }
func (e PermanentError) Unwrap() error { return e.Err }

// SnoozeError makes the task run again after After without using an
// attempt (pgsched.Snooze).
type SnoozeError struct{ After time.Duration }

func (e SnoozeError) Error() string { return fmt.Sprintf("snoozed for %s", e.After) }

// RetryAfterError makes the task retry after After instead of the
// policy's backoff; attempt limits still apply (pgsched.RetryAfter).
type RetryAfterError struct {
	After time.Duration
	Err   error
}

func (e RetryAfterError) Error() string { return fmt.Sprintf("retry after %s: %v", e.After, e.Err) }
func (e RetryAfterError) Unwrap() error { return e.Err }
