package store

import (
	"context"
	"time"

	"github.com/pgsched/pgsched/internal/dbgen"
)

// The web console's reads (pgschedui), as sqlc types them.
type (
	ConsoleNode      = dbgen.ConsoleNodesRow
	ConsolePartition = dbgen.ConsolePartitionsRow
	ConsoleKind      = dbgen.ConsoleKindsRow
	ConsoleDead      = dbgen.ConsoleDeadRow
)

// ConsoleNodes lists the nodes (the cluster view).
func (s *PG) ConsoleNodes(ctx context.Context, db DBTX) ([]ConsoleNode, error) {
	rows, err := s.q.ConsoleNodes(ctx, s.db(db))
	return rows, translate(err)
}

// ConsolePartitions lists each partition's owner and who serves it.
func (s *PG) ConsolePartitions(ctx context.Context, db DBTX) ([]ConsolePartition, error) {
	rows, err := s.q.ConsolePartitions(ctx, s.db(db))
	return rows, translate(err)
}

// ConsoleKinds counts tasks per kind and state.
func (s *PG) ConsoleKinds(ctx context.Context, db DBTX) ([]ConsoleKind, error) {
	rows, err := s.q.ConsoleKinds(ctx, s.db(db))
	return rows, translate(err)
}

// ConsoleLateness is how long, in seconds, the longest-waiting due head
// has waited (0 when none is due).
func (s *PG) ConsoleLateness(ctx context.Context, db DBTX) (float64, error) {
	v, err := s.q.ConsoleLateness(ctx, s.db(db))
	return v, translate(err)
}

// ConsoleDead lists the newest dead tasks, of kind when given.
func (s *PG) ConsoleDead(ctx context.Context, db DBTX, kind string, max int) ([]ConsoleDead, error) {
	rows, err := s.q.ConsoleDead(ctx, s.db(db), dbgen.ConsoleDeadParams{
		Kind: text(kind), MaxRows: int32(max)})
	return rows, translate(err)
}

// Dead and key lookups for the console's detail pages.
type (
	ConsoleDeadTask = dbgen.ConsoleDeadTaskRow
	ConsoleKeyRow   = dbgen.ConsoleTaskKeyRow
)

// ConsoleDeadTask is the dead task id, if it is dead.
func (s *PG) ConsoleDeadTask(ctx context.Context, db DBTX, id int64) ([]ConsoleDeadTask, error) {
	rows, err := s.q.ConsoleDeadTask(ctx, s.db(db), id)
	return rows, translate(err)
}

// ConsoleTaskKey finds a key pending, running, completed or dead.
func (s *PG) ConsoleTaskKey(ctx context.Context, db DBTX, k Key) ([]ConsoleKeyRow, error) {
	rows, err := s.q.ConsoleTaskKey(ctx, s.db(db), dbgen.ConsoleTaskKeyParams{
		OrderingID: k.OrderingID, ScheduledAt: k.ScheduledAt, UniquenessKey: k.UniquenessKey})
	return rows, translate(err)
}

// ConsoleTasks lists up to max pending and running tasks for the console:
// an ordering_id's in run order (of kind and state when given), running
// ones oldest claim first, or the first in key order, of kind and state
// when given.
func (s *PG) ConsoleTasks(ctx context.Context, db DBTX, orderingID, kind, state string, max int) ([]Listed, error) {
	var out []Listed
	switch {
	case orderingID != "":
		rows, err := s.q.ConsoleTasksOfOrdering(ctx, s.db(db), dbgen.ConsoleTasksOfOrderingParams{OrderingID: orderingID, MaxRows: int32(max)})
		for _, r := range rows {
			if (kind == "" || r.Kind == kind) && (state == "" || r.State == state) {
				out = append(out, listed(dbgen.TaskListRow(r)))
			}
		}
		return out, translate(err)
	case state == "running":
		rows, err := s.q.ConsoleTasksRunning(ctx, s.db(db), dbgen.ConsoleTasksRunningParams{Kind: text(kind), MaxRows: int32(max)})
		for _, r := range rows {
			out = append(out, listed(dbgen.TaskListRow(r)))
		}
		return out, translate(err)
	default:
		rows, err := s.q.ConsoleTasks(ctx, s.db(db), dbgen.ConsoleTasksParams{Kind: text(kind), State: text(state), MaxRows: int32(max)})
		for _, r := range rows {
			out = append(out, listed(dbgen.TaskListRow(r)))
		}
		return out, translate(err)
	}
}

// ConsoleNow is the database's time (a page's "as of").
func (s *PG) ConsoleNow(ctx context.Context, db DBTX) (time.Time, error) {
	t, err := s.q.ConsoleNow(ctx, s.db(db))
	return t, translate(err)
}
