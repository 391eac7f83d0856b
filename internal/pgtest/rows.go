package pgtest

import (
	"context"
	"testing"
	"time"
)

// TaskRow is a task in any state, for storage tests to start from without
// enqueueing and claiming through the engine.
type TaskRow struct {
	OrderingID    string
	ScheduledAt   time.Time // default: now
	UniquenessKey string
	Kind          string // default: "default"
	Payload       string // JSON; default: {}
	// State is "pending" (the ordering_id's head, idle), "backlog" (behind
	// its head), "running" (a head held by NodeID and Epoch), "dead" or
	// "completed" (a tombstone).
	State     string
	NodeID    string // running: default "n1"
	Epoch     int64  // running: default 1
	Attempt   int
	LastError string
}

// InsertTask writes r straight into the schema's tables, in the partition
// the ordering_id belongs to, and returns its id (0 for a completion). It
// keeps no invariant the engine keeps (one head per ordering_id, backlog
// flags, the nodes table): the test states what it needs.
func (db *DB) InsertTask(tb testing.TB, r TaskRow) int64 {
	tb.Helper()
	if r.ScheduledAt.IsZero() {
		r.ScheduledAt = time.Now()
	}
	if r.Kind == "" {
		r.Kind = "default"
	}
	if r.Payload == "" {
		r.Payload = "{}"
	}
	if r.NodeID == "" {
		r.NodeID = "n1"
	}
	if r.Epoch == 0 {
		r.Epoch = 1
	}
	s := db.Schema
	part := "(SELECT " + s + ".partition_of($1, partition_count) FROM " + s + ".settings)"
	var q string
	args := []any{r.OrderingID, r.ScheduledAt, r.UniquenessKey, r.Kind, r.Payload, r.Attempt, r.LastError}
	switch r.State {
	case "pending":
		q = `INSERT INTO ` + s + `.heads (partition_id, ordering_id, scheduled_at, uniqueness_key, kind, payload, run_at, attempt, last_error)
			SELECT ` + part + `, $1, $2, $3, $4, $5::jsonb, $2, $6, nullif($7, '') RETURNING id`
	case "running":
		q = `INSERT INTO ` + s + `.heads (partition_id, ordering_id, scheduled_at, uniqueness_key, kind, payload, run_at, attempt, last_error,
				running, node_id, epoch, claimed_at)
			SELECT ` + part + `, $1, $2, $3, $4, $5::jsonb, $2, $6, nullif($7, ''), true, $8, $9, now() RETURNING id`
		args = append(args, r.NodeID, r.Epoch)
	case "backlog":
		q = `INSERT INTO ` + s + `.backlog (partition_id, ordering_id, scheduled_at, uniqueness_key, kind, payload, run_at, attempt, last_error)
			SELECT ` + part + `, $1, $2, $3, $4, $5::jsonb, $2, $6, nullif($7, '') RETURNING id`
	case "dead":
		q = `INSERT INTO ` + s + `.dead_tasks (partition_id, id, ordering_id, scheduled_at, uniqueness_key, kind, payload, attempt, last_error, node_id)
			SELECT ` + part + `, nextval('` + s + `.task_id_seq'), $1, $2, $3, $4, $5::jsonb, $6, nullif($7, ''), $8 RETURNING id`
		args = append(args, r.NodeID)
	case "completed":
		q = `INSERT INTO ` + s + `.completions (partition_id, ordering_id, scheduled_at, uniqueness_key, kind, attempt, node_id, completed_at)
			SELECT ` + part + `, $1, $2, $3, $4, $5, $6, now() RETURNING 0::bigint`
		args = []any{r.OrderingID, r.ScheduledAt, r.UniquenessKey, r.Kind, r.Attempt, r.NodeID}
	default:
		tb.Fatalf("pgtest: InsertTask: unknown state %q", r.State)
	}
	var id int64
	err := db.Pool.QueryRow(context.Background(), q, args...).Scan(&id)
	if err != nil {
		tb.Fatalf("pgtest: InsertTask %+v: %v", r, err)
	}
	return id
}
