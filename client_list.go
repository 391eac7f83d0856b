package pgsched

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsched/pgsched/internal/store"
)

// TaskState is where a listed task stands.
type TaskState string

// The states ListTasks reports and filters by.
const (
	StatePending TaskState = "pending"
	StateRunning TaskState = "running"
)

// TaskFilter selects tasks for ListTasks; every field set must match.
type TaskFilter struct {
	Kind       string
	OrderingID string
	State      TaskState
	// DueBy selects tasks whose run time is at or before it.
	DueBy time.Time
	// After continues a listing: only keys after this one (the last key
	// of the previous page).
	After Key
	// Limit caps the result; 0 means 100, at most 10000.
	Limit int
}

// TaskInfo is a pending or running task as the database holds it (the
// pgsched.tasks view).
type TaskInfo struct {
	Task
	ID    int64
	State TaskState
	// RunAt is when it runs next: ScheduledAt, or later after a retry.
	RunAt     time.Time
	Attempt   int
	LastError string
	// NodeID runs it (running tasks only).
	NodeID string
}

const maxListLimit = 10000

// ListTasks returns the pending and running tasks f selects, in key order
// (ordering_id, scheduled_at, uniqueness_key): an ordering_id's tasks in
// the order they run.
func (c *Client) ListTasks(ctx context.Context, f TaskFilter) ([]TaskInfo, error) {
	return c.listTasks(ctx, c.pool, f)
}

// ListTasksTx is ListTasks inside the caller's transaction: it sees what
// the transaction scheduled before it commits.
func (c *Client) ListTasksTx(ctx context.Context, tx pgx.Tx, f TaskFilter) ([]TaskInfo, error) {
	return c.listTasks(ctx, tx, f)
}

func (c *Client) listTasks(ctx context.Context, db store.DBTX, f TaskFilter) ([]TaskInfo, error) {
	switch {
	case f.Limit < 0 || f.Limit > maxListLimit:
		return nil, fmt.Errorf("pgsched: list tasks: %w: limit must be between 0 and %d, got %d", ErrInvalidTask, maxListLimit, f.Limit)
	case f.State != "" && f.State != StatePending && f.State != StateRunning:
		return nil, fmt.Errorf("pgsched: list tasks: %w: state must be %q or %q, got %q", ErrInvalidTask, StatePending, StateRunning, f.State)
	}
	if f.Limit == 0 {
		f.Limit = 100
	}
	rows, err := c.store.ListTasks(ctx, db, store.TaskFilter{
		Kind: f.Kind, OrderingID: f.OrderingID, State: string(f.State), DueBy: f.DueBy,
		After: store.Key(f.After), Limit: f.Limit,
	})
	if err != nil {
		return nil, fmt.Errorf("pgsched: list tasks: %w", err)
	}
	out := make([]TaskInfo, len(rows))
	for i, r := range rows {
		out[i] = TaskInfo{
			Task: Task{OrderingID: r.OrderingID, ScheduledAt: r.ScheduledAt, UniquenessKey: r.UniquenessKey,
				Kind: r.Kind, Payload: json.RawMessage(r.Payload), Priority: r.Priority, GroupKey: r.GroupKey},
			ID: r.ID, State: TaskState(r.State), RunAt: r.RunAt, Attempt: r.Attempt, LastError: r.LastError, NodeID: r.NodeID,
		}
	}
	return out, nil
}

// TaskOutput is the result the handler of the completed task k recorded
// with Job.RecordOutput: nil when it recorded none, and also when no
// completion of k is remembered (not completed, or longer ago than the
// retention window). pgsched.task_output answers the same in SQL.
func (c *Client) TaskOutput(ctx context.Context, k Key) (json.RawMessage, error) {
	if err := validateKey(k, -1); err != nil {
		return nil, err
	}
	out, err := c.store.TaskOutput(ctx, c.pool, k.OrderingID, k.ScheduledAt, k.UniquenessKey)
	if err != nil {
		return nil, fmt.Errorf("pgsched: task output: %w", err)
	}
	return out, nil
}
