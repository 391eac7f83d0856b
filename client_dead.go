package pgsched

import (
	"context"
	"fmt"
	"time"

	"github.com/pgsched/pgsched/internal/store"
)

// DeadFilter selects dead tasks for RetryDeadWhere and DeleteDeadWhere:
// every field set must match, and at least one must be set (a zero filter
// is refused rather than taken as "all"; DiedBefore: time.Now() selects
// every dead task).
type DeadFilter struct {
	Kind       string
	OrderingID string
	// DiedAfter selects tasks that died at or after it.
	DiedAfter time.Time
	// DiedBefore selects tasks that died before it.
	DiedBefore time.Time
}

// RetryDead puts the dead task with this id back in line, as SQL's
// pgsched.retry_dead does: enqueued again as a new task (new id, attempt
// count reset) with its ordering_id, uniqueness_key, kind and payload, due
// now, so it runs after whatever its ordering_id already has due. It
// returns 1, or 0 when there is no dead task with that id.
func (c *Client) RetryDead(ctx context.Context, id int64) (int, error) {
	n, err := c.store.RetryDead(ctx, c.pool, id)
	if err != nil {
		return 0, fmt.Errorf("pgsched: retry dead task %d: %w", id, err)
	}
	return n, nil
}

// RetryDeadWhere puts every dead task f selects back in line in one
// statement (pgsched.retry_dead_where) and returns how many.
func (c *Client) RetryDeadWhere(ctx context.Context, f DeadFilter) (int, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	n, err := c.store.RetryDeadWhere(ctx, c.pool, store.DeadFilter(f))
	if err != nil {
		return 0, fmt.Errorf("pgsched: retry dead tasks: %w", err)
	}
	return n, nil
}

// DeleteDead deletes the dead task with this id for good
// (pgsched.delete_dead); it returns 1, or 0 when there is none.
func (c *Client) DeleteDead(ctx context.Context, id int64) (int, error) {
	n, err := c.store.DeleteDead(ctx, c.pool, id)
	if err != nil {
		return 0, fmt.Errorf("pgsched: delete dead task %d: %w", id, err)
	}
	return n, nil
}

// DeleteDeadWhere deletes every dead task f selects in one statement
// (pgsched.delete_dead_where) and returns how many.
func (c *Client) DeleteDeadWhere(ctx context.Context, f DeadFilter) (int, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	n, err := c.store.DeleteDeadWhere(ctx, c.pool, store.DeadFilter(f))
	if err != nil {
		return 0, fmt.Errorf("pgsched: delete dead tasks: %w", err)
	}
	return n, nil
}
