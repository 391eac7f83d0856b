package pgsched

import (
	"context"
	"fmt"
	"time"

	"github.com/pgsched/pgsched/internal/dispatch"
)

// PausedKind is a kind no node starts, since PausedAt.
type PausedKind struct {
	Kind     string
	PausedAt time.Time
}

// PauseKind stops the whole cluster from starting tasks of kind, as SQL's
// pgsched.pause_kind does: claims skip it, no finish hands one over, and
// nodes give back those they hold but have not started. Tasks already
// running finish; the kind's ordering_ids wait; other kinds flow. The
// pause is a row, so it holds across restarts until ResumeKind. It
// reports whether the kind was not paused before.
func (c *Client) PauseKind(ctx context.Context, kind string) (bool, error) {
	if err := validateText(-1, "kind", kind); err != nil {
		return false, err
	}
	ok, err := c.store.PauseKind(ctx, c.pool, kind)
	if err != nil {
		return false, fmt.Errorf("pgsched: pause kind %q: %w", kind, err)
	}
	return ok, nil
}

// ResumeKind lets the cluster start tasks of kind again
// (pgsched.resume_kind) and reports whether it was paused.
func (c *Client) ResumeKind(ctx context.Context, kind string) (bool, error) {
	if err := validateText(-1, "kind", kind); err != nil {
		return false, err
	}
	ok, err := c.store.ResumeKind(ctx, c.pool, kind)
	if err != nil {
		return false, fmt.Errorf("pgsched: resume kind %q: %w", kind, err)
	}
	return ok, nil
}

// PausedKinds lists the paused kinds (the pgsched.paused view).
func (c *Client) PausedKinds(ctx context.Context) ([]PausedKind, error) {
	rows, err := c.store.PausedKinds(ctx, c.pool)
	if err != nil {
		return nil, fmt.Errorf("pgsched: paused kinds: %w", err)
	}
	out := make([]PausedKind, len(rows))
	for i, r := range rows {
		out[i] = PausedKind(r)
	}
	return out, nil
}

// ErrTaskCancelled is the cause (context.Cause) of a handler's context when
// an operator cancelled its task with CancelRunning.
var ErrTaskCancelled = dispatch.ErrCancelled

// CancelRunning cancels a running task, as SQL's pgsched.cancel_running
// does: its handler's context is cancelled on whatever node runs it (told
// by NOTIFY, or at its next maintenance round), with ErrTaskCancelled as
// the cause, and the task ends dead with the reason "cancelled", never
// retried, unless the handler completed it first. It reports whether the
// request is new; ErrNotFound when the key is not running (Cancel removes
// a pending task).
func (c *Client) CancelRunning(ctx context.Context, key Key) (bool, error) {
	if err := validateKey(key, -1); err != nil {
		return false, err
	}
	ok, err := c.store.CancelRunning(ctx, c.pool, key.OrderingID, key.ScheduledAt, key.UniquenessKey)
	if err != nil {
		return false, fmt.Errorf("pgsched: cancel running task %s: %w", key.OrderingID, err)
	}
	return ok, nil
}
