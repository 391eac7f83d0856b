package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsched/pgsched/internal/dbgen"
)

// TaskFilter selects pending and running tasks; every field set must match.
type TaskFilter struct {
	Kind       string
	OrderingID string
	State      string // "pending" or "running"
	DueBy      time.Time
	After      Key // keyset paging: keys strictly after this one
	Limit      int
}

// Key is a task's key.
type Key struct {
	OrderingID    string
	ScheduledAt   time.Time
	UniquenessKey string
}

// Listed is a task as the tasks view shows it.
type Listed struct {
	ID            int64
	OrderingID    string
	ScheduledAt   time.Time
	UniquenessKey string
	Kind          string
	Payload       []byte
	State         string
	RunAt         time.Time
	Attempt       int
	LastError     string
	NodeID        string
	Priority      int32
	GroupKey      string
}

// ListTasks returns the tasks f selects in key order.
func (s *PG) ListTasks(ctx context.Context, db DBTX, f TaskFilter) ([]Listed, error) {
	p := dbgen.TaskListParams{
		Kind: text(f.Kind), OrderingID: text(f.OrderingID), State: text(f.State),
		AfterOrderingID: f.After.OrderingID, AfterScheduledAt: f.After.ScheduledAt, AfterUniquenessKey: f.After.UniquenessKey,
		MaxRows: int32(f.Limit),
	}
	if !f.DueBy.IsZero() {
		p.DueBy = &f.DueBy
	}
	rows, err := s.q.TaskList(ctx, s.db(db), p)
	if err != nil {
		return nil, translate(err)
	}
	out := make([]Listed, len(rows))
	for i, r := range rows {
		out[i] = listed(r)
	}
	return out, nil
}

// listed is a row of the tasks view as the API lists it. The console's
// lists select the same columns, so their rows convert to TaskListRow.
func listed(r dbgen.TaskListRow) Listed {
	return Listed{
		ID: r.ID, OrderingID: r.OrderingID, ScheduledAt: r.ScheduledAt, UniquenessKey: r.UniquenessKey,
		Kind: r.Kind, Payload: r.Payload, State: r.State, RunAt: r.RunAt, Attempt: int(r.Attempt),
		LastError: r.LastError, NodeID: r.NodeID, Priority: r.Priority, GroupKey: r.GroupKey,
	}
}

// text is an optional filter: NULL when empty.
func text(v string) pgtype.Text { return pgtype.Text{String: v, Valid: v != ""} }
