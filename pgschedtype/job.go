// Package pgschedtype holds the types pgsched's layers share with its
// users: Job, the one type a claimed task has from the claim to its
// handler (the storage layer returns it, the dispatcher carries it, and a
// handler receives it as pgsched.Job, an alias), and RetryPolicy, which
// the executor applies (pgsched.RetryPolicy). It imports none of
// pgsched's layers, so every layer can share it without import cycles.
package pgschedtype

import (
	"encoding/json"
	"time"
)

// Job is a claimed task as its handler sees it. A handler gets its own
// copy: changing it changes nothing about the task.
type Job struct {
	// ID is the task's id, unique in its schema.
	ID int64
	// OrderingID, ScheduledAt and UniquenessKey are the task's key.
	OrderingID    string
	ScheduledAt   time.Time
	UniquenessKey string
	Kind          string
	Payload       json.RawMessage
	// Attempt is 1 on the first run.
	Attempt int
	// Partition is the logical partition of OrderingID.
	Partition int
	// RunAt is when it was due: ScheduledAt, or later after a retry.
	RunAt time.Time
	// ClaimedAt is when this node claimed it, on the database's clock.
	ClaimedAt time.Time
	// Tick is true for a recurring schedule's tick: OrderingID is then
	// the schedule's name.
	Tick bool
	// Traceparent is the W3C trace context of the call that enqueued the
	// task (a Client with a Tracer, or the SQL API's traceparent
	// argument), "" for none; see Tracer.
	Traceparent string
	// Priority is the task's priority: claims take due tasks of a higher
	// priority first. 0 by default.
	Priority int32
	// GroupKey is the task's group (such as a tenant), "" for none.
	GroupKey string

	output json.RawMessage // see RecordOutput
}
