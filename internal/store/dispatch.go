package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/pgsched/pgsched/internal/dbgen"
)

// Claimed is a task a node now runs.
type Claimed struct {
	Partition     int
	ID            int64
	OrderingID    string
	ScheduledAt   time.Time
	UniquenessKey string
	Kind          string
	Payload       json.RawMessage
	Attempt       int
	RunAt         time.Time
	ClaimedAt     time.Time
}

// Claim takes the head task of up to max due queues of one partition for the
// node (node, epoch). Nothing is claimed when the node's lease is not live.
func (s *Store) Claim(ctx context.Context, db DBTX, node string, epoch int64, partition, max int) ([]Claimed, error) {
	rows, err := s.q.TaskClaimDue(ctx, s.db(db), dbgen.TaskClaimDueParams{
		NodeID: node, Epoch: epoch, PartitionID: int32(partition), MaxTasks: int32(max),
	})
	if err != nil {
		return nil, err
	}
	out := make([]Claimed, len(rows))
	for i, r := range rows {
		out[i] = Claimed{
			Partition: int(r.PartitionID), ID: r.ID, OrderingID: r.OrderingID, ScheduledAt: r.ScheduledAt,
			UniquenessKey: r.UniquenessKey, Kind: r.Kind, Payload: r.Payload, Attempt: int(r.Attempt),
			RunAt: r.RunAt, ClaimedAt: r.ClaimedAt,
		}
	}
	return out, nil
}

// Outcome words understood by Finish.
const (
	OutcomeCompleted = "completed"
	OutcomeRetry     = "retry"
	OutcomeDead      = "dead"
	OutcomeRelease   = "release"
)

// Outcome is what became of one claimed task.
type Outcome struct {
	Partition  int
	OrderingID string
	ID         int64
	Outcome    string
	RetryAt    time.Time // for OutcomeRetry
	Error      string
}

// Finish records outcomes in one statement. Only tasks still held by (node,
// epoch) change; it returns the ids that did.
func (s *Store) Finish(ctx context.Context, db DBTX, node string, epoch int64, outs []Outcome) ([]int64, error) {
	n := len(outs)
	arg := dbgen.TaskFinishParams{
		NodeID: node, Epoch: epoch,
		PartitionIds: make([]int32, n), OrderingIds: make([]string, n), TaskIds: make([]int64, n),
		Outcomes: make([]string, n), RetryAts: make([]time.Time, n), Errors: make([]string, n),
	}
	for i, o := range outs {
		arg.PartitionIds[i] = int32(o.Partition)
		arg.OrderingIds[i] = o.OrderingID
		arg.TaskIds[i] = o.ID
		arg.Outcomes[i] = o.Outcome
		arg.RetryAts[i] = o.RetryAt
		if o.RetryAt.IsZero() {
			arg.RetryAts[i] = time.Unix(0, 0)
		}
		arg.Errors[i] = o.Error
	}
	return s.q.TaskFinish(ctx, s.db(db), arg)
}

// RescueExpired gives the running tasks of nodes with expired leases back to
// their queues. nodes limits it to those nodes; nil means any.
func (s *Store) RescueExpired(ctx context.Context, db DBTX, nodes []string) (int, error) {
	n, err := s.q.TaskRescueExpired(ctx, s.db(db), nodes)
	return int(n), err
}

// NextDue returns, per partition, when its earliest idle queue is due; a
// partition without one is absent.
func (s *Store) NextDue(ctx context.Context, db DBTX, partitions []int32) (map[int]time.Time, error) {
	rows, err := s.q.QueueNextDue(ctx, s.db(db), partitions)
	if err != nil {
		return nil, err
	}
	out := make(map[int]time.Time, len(rows))
	for _, r := range rows {
		out[int(r.PartitionID)] = r.NextAt
	}
	return out, nil
}

// EnsureCompletionPartitions creates tomorrow's completion partitions ahead
// and drops expired ones, returning how many were dropped.
func (s *Store) EnsureCompletionPartitions(ctx context.Context, db DBTX, daysAhead int) (int, error) {
	n, err := s.q.CompletionEnsurePartitions(ctx, s.db(db), int32(daysAhead))
	return int(n), err
}
