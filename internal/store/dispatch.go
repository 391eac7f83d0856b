package store

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsched/pgsched/internal/dbgen"
	"github.com/pgsched/pgsched/pgschedtype"
)

// Claimed is a task a node now runs.
type Claimed = pgschedtype.Job

// Claim takes the head task of up to max due queues from the partitions, in
// the order given, for the node (node, epoch), in one transaction. Nothing is
// claimed when the node's lease is not live. Tasks due within ahead are
// claimed too; their RunAt is after their ClaimedAt. Tasks of a higher
// priority come first (see ClaimFrom).
func (s *PG) Claim(ctx context.Context, db DBTX, node string, epoch int64, partitions []int32, max int, ahead time.Duration) ([]Claimed, error) {
	jobs, _, err := s.ClaimFrom(ctx, db, node, epoch, partitions, nil, max, ahead)
	return jobs, err
}

// ClaimFrom is Claim that also looks for due tasks of a priority other
// than 0 in served (the node's other partitions, not known to be due), and
// returns the partitions the claim did not reach. With priorities in use
// the claim takes each priority's due heads, highest first, from every
// partition before it moves to the next lower one. On one server no
// partition is unreached: within a priority the claim takes the
// partitions in the order given until it has max tasks, so a partition
// before the last one that gave tasks ran dry at that priority and every
// higher one.
func (s *PG) ClaimFrom(ctx context.Context, db DBTX, node string, epoch int64, partitions, served []int32, max int,
	ahead time.Duration) (jobs []Claimed, unreached []int32, err error) {
	rows, err := s.q.TaskClaimDue(ctx, s.db(db), dbgen.TaskClaimDueParams{
		NodeID: node, Epoch: epoch, PartitionIds: partitions, MaxTasks: sqlCount(max), AheadSeconds: ahead.Seconds(),
		ServedPartitions: served,
	})
	if err != nil {
		return nil, nil, err
	}
	jobs = make([]Claimed, len(rows))
	for i, r := range rows {
		jobs[i] = claimedRow(r)
	}
	return jobs, nil, nil
}

// sqlCount is n as the int4 a statement's row count takes, capped at its
// largest: a count beyond it means all rows, where converting would wrap
// it to a negative count that claims nothing.
func sqlCount(n int) int32 {
	return int32(min(max(n, 0), math.MaxInt32))
}

// claimedRow builds a Claimed from a row of pgsched.claim_due_many.
func claimedRow(r dbgen.TaskClaimDueRow) Claimed {
	return claimed(r.PartitionID, r.ID, r.OrderingID, r.ScheduledAt, r.UniquenessKey, r.Kind,
		r.Payload, r.Attempt, r.RunAt, r.ClaimedAt, r.Tick, r.Traceparent, r.Priority, r.GroupKey)
}

// claimed builds a Claimed from the columns a claim and a handover return.
func claimed(partition int32, id int64, orderingID string, scheduledAt time.Time, uniquenessKey, kind string,
	payload []byte, attempt int32, runAt, claimedAt time.Time, tick bool, traceparent string, priority int32, groupKey string) Claimed {
	return Claimed{
		Partition: int(partition), ID: id, OrderingID: orderingID, ScheduledAt: scheduledAt,
		UniquenessKey: uniquenessKey, Kind: kind, Payload: payload, Attempt: int(attempt),
		RunAt: runAt, ClaimedAt: claimedAt, Tick: tick, Traceparent: traceparent, Priority: priority, GroupKey: groupKey,
	}
}

// Outcome is what became of one claimed task.
type Outcome struct {
	Partition  int
	OrderingID string
	ID         int64
	// ClaimedAt is the claim's time as the claim (or handover) returned
	// it: an outcome applies only to the claim it is for.
	ClaimedAt time.Time
	Outcome   pgschedtype.Outcome // completed, retry, dead, release or snooze
	RetryIn   time.Duration       // for a retry or snooze: delay from the database's now
	Error     string
	// Output is the handler's result, kept with a completion; nil for
	// none (a pointer, so an outcome without one costs a word).
	Output *Output
}

// Output is a handler's result (JSON) and the rest of its task's key,
// which the completion record is found by.
type Output struct {
	JSON          []byte
	ScheduledAt   time.Time
	UniquenessKey string
}

// Handover lets a finish start the due successors of the tasks it
// finishes on the finishing node itself, instead of leaving each to a
// claim (see pgsched.finish_tasks). The zero value hands nothing over.
type Handover struct {
	// Max is the most successors handed over by one call.
	Max int
	// Partitions are the partitions the node may take tasks from.
	Partitions []int32
	// Limit stops handing over within an ordering_id after this many in a
	// row, so a long chain goes through a claim and other ordering_ids get
	// their turn.
	Limit int
}

// Finished is what a Finish statement did.
type Finished struct {
	// Applied are the ids of the tasks whose outcome was recorded; the
	// others were no longer held by the node's term (fenced).
	Applied []int64
	// HandedOver are the successors started on the node (see Handover),
	// as claimed tasks.
	HandedOver []Claimed
	// Claimable counts the heads the statement left for a claim:
	// successors promoted and not handed over, and tasks given back by
	// retry or release. Zero means no work became due or will, so there
	// is no need to look for any.
	Claimable int
}

// Finish records outcomes in one statement. Only tasks still held by the
// claim each outcome is for change: (node, epoch) and ClaimedAt. A batch
// carrying outputs also stores them with the completions, in the same
// transaction (db's own, or one Finish begins on it).
func (s *PG) Finish(ctx context.Context, db DBTX, node string, epoch int64, outs []Outcome, hand Handover) (Finished, error) {
	if withOutputs(outs) {
		return s.finishWithOutputs(ctx, db, node, epoch, outs, hand)
	}
	rows, err := s.q.TaskFinish(ctx, s.db(db), finishParams(node, epoch, outs, hand))
	if err != nil {
		return Finished{}, err
	}
	return finished(rows), nil
}

// withOutputs reports whether any outcome carries an output.
func withOutputs(outs []Outcome) bool {
	for _, o := range outs {
		if o.Output != nil {
			return true
		}
	}
	return false
}

// finishWithOutputs is Finish for a batch with outputs: the finish and
// the outputs commit together, so an output is kept exactly when its
// completion is.
func (s *PG) finishWithOutputs(ctx context.Context, db DBTX, node string, epoch int64, outs []Outcome, hand Handover) (Finished, error) {
	b, ok := db.(interface {
		Begin(context.Context) (pgx.Tx, error)
	})
	if !ok {
		return Finished{}, fmt.Errorf("recording task outputs needs a pool, connection or transaction, not %T", db)
	}
	var f Finished
	err := pgx.BeginFunc(ctx, b, func(tx pgx.Tx) error {
		rows, err := s.q.TaskFinish(ctx, s.db(tx), finishParams(node, epoch, outs, hand))
		if err != nil {
			return err
		}
		f = finished(rows)
		var arg dbgen.TaskOutputsRecordParams
		for _, o := range outs {
			if o.Output == nil || o.Outcome != pgschedtype.OutcomeCompleted {
				continue
			}
			arg.PartitionIds = append(arg.PartitionIds, int32(o.Partition))
			arg.OrderingIds = append(arg.OrderingIds, o.OrderingID)
			arg.ScheduledAts = append(arg.ScheduledAts, o.Output.ScheduledAt)
			arg.UniquenessKeys = append(arg.UniquenessKeys, o.Output.UniquenessKey)
			arg.Outputs = append(arg.Outputs, o.Output.JSON)
		}
		if len(arg.PartitionIds) == 0 {
			return nil
		}
		_, err = s.q.TaskOutputsRecord(ctx, s.db(tx), arg)
		return err
	})
	if err != nil {
		return Finished{}, err
	}
	return f, nil
}

// TaskOutput is the result a completed task's handler recorded, by the
// task's key; nil when it recorded none or no completion of the key is
// remembered.
func (s *PG) TaskOutput(ctx context.Context, db DBTX, orderingID string, scheduledAt time.Time, uniquenessKey string) ([]byte, error) {
	out, err := s.q.TaskOutput(ctx, s.db(db), dbgen.TaskOutputParams{OrderingID: orderingID, ScheduledAt: scheduledAt, UniquenessKey: uniquenessKey})
	return out, translate(err)
}

// finishParams are the arguments of pgsched.finish_tasks for outs.
func finishParams(node string, epoch int64, outs []Outcome, hand Handover) dbgen.TaskFinishParams {
	n := len(outs)
	arg := dbgen.TaskFinishParams{
		NodeID: node, Epoch: epoch,
		PartitionIds: make([]int32, n), OrderingIds: make([]string, n), TaskIds: make([]int64, n),
		ClaimedAts: make([]time.Time, n), Outcomes: make([]string, n), RetryDelays: make([]float64, n), Errors: make([]string, n),
		ChainMax: int32(hand.Max), ChainPartitions: hand.Partitions, ChainLimit: int32(hand.Limit),
	}
	for i, o := range outs {
		arg.PartitionIds[i] = int32(o.Partition)
		arg.OrderingIds[i] = o.OrderingID
		arg.TaskIds[i] = o.ID
		arg.ClaimedAts[i] = o.ClaimedAt
		arg.Outcomes[i] = string(o.Outcome)
		arg.RetryDelays[i] = o.RetryIn.Seconds()
		arg.Errors[i] = StorableText(o.Error, MaxErrorBytes)
	}
	return arg
}

// finished reads the rows of pgsched.finish_tasks.
func finished(rows []dbgen.TaskFinishRow) Finished {
	f := Finished{HandedOver: make([]Claimed, 0, len(rows))}
	for _, r := range rows {
		if r.Summary {
			f.Applied, f.Claimable = r.Applied, int(r.Claimable)
			continue
		}
		f.HandedOver = append(f.HandedOver, claimed(r.PartitionID, r.ID, r.OrderingID, r.ScheduledAt, r.UniquenessKey, r.Kind,
			r.Payload, r.Attempt, r.RunAt, r.ClaimedAt, r.Tick, r.Traceparent, r.Priority, r.GroupKey))
	}
	return f
}

// Held is a task the database says a node runs.
type Held struct {
	Partition  int
	OrderingID string
	ID         int64
	ClaimedAt  time.Time
}

// HeldBy returns the tasks running under (node, epoch). It reads the whole
// heads table (see TaskHeldBy), so callers ask only when in doubt.
func (s *PG) HeldBy(ctx context.Context, db DBTX, node string, epoch int64) ([]Held, error) {
	rows, err := s.q.TaskHeldBy(ctx, s.db(db), dbgen.TaskHeldByParams{NodeID: node, Epoch: epoch})
	if err != nil {
		return nil, err
	}
	out := make([]Held, len(rows))
	for i, r := range rows {
		out[i] = Held{Partition: int(r.PartitionID), OrderingID: r.OrderingID, ID: r.ID, ClaimedAt: r.ClaimedAt}
	}
	return out, nil
}

// RescueExpired gives the running tasks of nodes with expired leases back to
// their ordering_ids. nodes limits it to those nodes; nil means every node
// whose row says its lease expired.
func (s *PG) RescueExpired(ctx context.Context, db DBTX, nodes []string) (int, error) {
	n, err := s.q.TaskRescueExpired(ctx, s.db(db), dbgen.TaskRescueExpiredParams{Nodes: nodes})
	return int(n), err
}

// RescueOrphaned gives back every running task whose node's lease is not
// live, the node's row there or not. It reads the whole heads table, so
// callers run it now and then, not every round.
func (s *PG) RescueOrphaned(ctx context.Context, db DBTX) (int, error) {
	n, err := s.q.TaskRescueExpired(ctx, s.db(db), dbgen.TaskRescueExpiredParams{Orphans: true})
	return int(n), err
}

// DuePartition is a partition with idle queues and how long until the
// earliest is due (zero or negative: due now).
type DuePartition struct {
	Partition int
	DueIn     time.Duration
}

// NextDue returns the partitions among partitions that have idle queues,
// most overdue first.
func (s *PG) NextDue(ctx context.Context, db DBTX, partitions []int32) ([]DuePartition, error) {
	rows, err := s.q.QueueNextDue(ctx, s.db(db), partitions)
	if err != nil {
		return nil, err
	}
	return dueRows(rows), nil
}

// dueRows reads the rows of pgsched.queue_next_due, most overdue first.
func dueRows(rows []dbgen.QueueNextDueRow) []DuePartition {
	out := make([]DuePartition, len(rows))
	for i, r := range rows {
		out[i] = DuePartition{Partition: int(r.PartitionID), DueIn: seconds(r.DueIn)}
	}
	slices.SortFunc(out, func(a, b DuePartition) int { return cmp.Compare(a.DueIn, b.DueIn) })
	return out
}

// EnsureCompletionPartitions creates tomorrow's completion partitions ahead
// and drops expired ones, returning how many were dropped.
func (s *PG) EnsureCompletionPartitions(ctx context.Context, db DBTX, daysAhead int) (int, error) {
	n, err := s.q.CompletionEnsurePartitions(ctx, s.db(db), int32(daysAhead))
	return int(n), err
}
