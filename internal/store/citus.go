package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsched/pgsched/internal/dbgen"
)

// Citus is the Store of a schema distributed over Citus. It runs what PG
// runs, but for a worker node's claims, finishes and due-partition reads,
// which go to the Citus workers holding the partitions, one call per
// Citus worker: pgsched.claim_due_on, finish_tasks_on and
// queue_next_due_on are delegated functions there (see
// db/citus/functions/citus_delegate.sql), so the coordinator routes the
// call instead of running its PL/pgSQL and routing each statement itself,
// and the call commits on that worker alone. It learns where each
// partition lives from pgsched.citus_routes and reads it again every
// placementTTL; a partition moved meanwhile is still served, through the
// worker the call went to. While the lookup finds no rows (a schema not
// yet migrated to delegated calls), and inside a transaction (Citus
// delegates no call there), the coordinator runs the calls as PG does.
//
// On the workers the calls read the workers' clocks: a claim checks the
// node's lease, written with the coordinator's clock, against the worker's
// now(). Keep the servers' clocks in sync (NTP), as Citus deployments do:
// a worker clock behind the coordinator's lets a node whose lease just ran
// out claim for that much longer.
//
// A call split over two Citus workers commits on each separately. When a
// later part fails, the earlier ones have committed: Finish returns what
// they did with the error (the node writes only the rest again), and
// Claim the tasks they claimed (the node runs them). The failed part
// itself may have committed too; the node treats it as any claim whose
// response it did not see (reconcile gives the tasks back).

// placementTTL is how long a read of the partitions' Citus workers is used.
const placementTTL = 30 * time.Second

// limitsTTL is how long a read of whether any kind has a limit is used: a
// limit set takes that long at most to reach the claims of its kind.
const limitsTTL = time.Second

// Citus is the Store of a schema distributed over Citus (see above).
type Citus struct {
	*PG
	mu  sync.Mutex // one placement read at a time
	cur atomic.Pointer[placement]

	limitsMu sync.Mutex
	limitsAt time.Time // when limitsOn was read
	limitsOn bool      // some kind has a limit (pgsched.set_limit)
}

// NewCitus returns the Store of a schema distributed over Citus.
func NewCitus(schema string) (*Citus, error) {
	pg, err := New(schema)
	if err != nil {
		return nil, err
	}
	return &Citus{PG: pg}, nil
}

// placement is where each partition's shard lives, as read at read.
type placement struct {
	read   time.Time
	worker map[int32]string // empty: not distributed over Citus
	// negative: a priority below 0 is in use (see ClaimFrom).
	negative bool
}

// Claim is PG.Claim, one transaction per Citus worker holding the
// partitions, each delegated to its worker, in the order each worker's
// first partition comes in the list. When a later call fails, the earlier
// ones have committed: their tasks are returned with the error, and are
// the node's to run.
func (s *Citus) Claim(ctx context.Context, db DBTX, node string, epoch int64, partitions []int32, max int, ahead time.Duration) ([]Claimed, error) {
	jobs, _, err := s.ClaimFrom(ctx, db, node, epoch, partitions, nil, max, ahead)
	return jobs, err
}

// ClaimFrom is Claim that also returns the partitions the claim did not
// reach: once max tasks are claimed the workers not yet called are not,
// and their partitions are unreached wherever they stand in the list.
//
// Priorities: each worker's call takes its heads by priority, and the
// first call also looks for heads of a priority above 0 in every served
// partition, through its worker (statements on partitions another worker
// holds go there), so those come first whichever worker holds them. With
// priorities below 0 in use (as the placement read last saw), the workers
// are called twice: first for priorities from 0 up, then, while there is
// room, for the rest, so no worker's negative ones go before another's
// default ones.
//
// Limits: while a kind has a limit, its parked tasks are claimed first, on
// the coordinator (pgsched.claim_limited, which counts what runs under each
// limit across the Citus workers); the delegated claims skip limited kinds.
func (s *Citus) ClaimFrom(ctx context.Context, db DBTX, node string, epoch int64, partitions, served []int32, max int,
	ahead time.Duration) (jobs []Claimed, unreached []int32, err error) {
	if s.limitsInUse(ctx, db) {
		rows, err := s.q.TaskClaimLimited(ctx, s.db(db), dbgen.TaskClaimLimitedParams{
			NodeID: node, Epoch: epoch, PartitionIds: append(slices.Clone(partitions), served...), MaxTasks: sqlCount(max),
			AheadSeconds: ahead.Seconds(),
		})
		if err != nil {
			return nil, nil, fmt.Errorf("claiming tasks of limited kinds on the Citus coordinator: %w", err)
		}
		for _, r := range rows {
			jobs = append(jobs, claimedRow(dbgen.TaskClaimDueRow(r)))
		}
		if len(jobs) >= max {
			return jobs, partitions, nil
		}
	}
	groups := s.byWorker(ctx, db, partitions)
	if groups == nil {
		more, unreached, err := s.PG.ClaimFrom(ctx, db, node, epoch, partitions, served, max-len(jobs), ahead)
		return append(jobs, more...), unreached, err
	}
	floors := []pgtype.Int4{{}}
	if p := s.cur.Load(); p != nil && p.negative {
		floors = []pgtype.Int4{{Int32: 0, Valid: true}, {}}
	}
	called := make([]bool, len(groups))
	for round, floor := range floors {
		for gi, g := range groups {
			if len(jobs) >= max {
				break
			}
			parts := pick(partitions, g)
			var look []int32
			if round == 0 && gi == 0 {
				look = served
			}
			rows, err := s.q.TaskClaimDueOn(ctx, s.db(db), dbgen.TaskClaimDueOnParams{
				Anchor: parts[0], NodeID: node, Epoch: epoch, PartitionIds: parts, MaxTasks: sqlCount(max - len(jobs)),
				AheadSeconds: ahead.Seconds(), ServedPartitions: look, MinPriority: floor,
			})
			if err != nil {
				return jobs, nil, fmt.Errorf("claiming on the Citus worker of partition %d: %w", parts[0], err)
			}
			called[gi] = true
			for _, r := range rows {
				jobs = append(jobs, claimedRow(dbgen.TaskClaimDueRow(r)))
			}
		}
	}
	for gi, g := range groups {
		if !called[gi] {
			unreached = append(unreached, pick(partitions, g)...)
		}
	}
	return jobs, unreached, nil
}

// Finish is PG.Finish, one statement per Citus worker holding the tasks,
// each delegated to its worker and committed there; successors handed
// over count against one budget, hand.Max. When a later call fails, the
// earlier ones have committed: Finish then returns what they did with the
// error, and the outcomes not among its Applied are the ones to try again.
func (s *Citus) Finish(ctx context.Context, db DBTX, node string, epoch int64, outs []Outcome, hand Handover) (Finished, error) {
	parts := make([]int32, len(outs))
	for i, o := range outs {
		parts[i] = int32(o.Partition)
	}
	groups := s.byWorker(ctx, db, parts)
	if groups == nil || withOutputs(outs) {
		// Outputs commit with their completions: in one transaction,
		// which the coordinator runs (Citus delegates no call there).
		return s.PG.Finish(ctx, db, node, epoch, outs, hand)
	}
	var f Finished
	for _, g := range groups {
		arg := finishParams(node, epoch, pick(outs, g), hand)
		rows, err := s.q.TaskFinishOn(ctx, s.db(db), dbgen.TaskFinishOnParams{
			Anchor: arg.PartitionIds[0], NodeID: arg.NodeID, Epoch: arg.Epoch, PartitionIds: arg.PartitionIds,
			OrderingIds: arg.OrderingIds, TaskIds: arg.TaskIds, ClaimedAts: arg.ClaimedAts, Outcomes: arg.Outcomes,
			RetryDelays: arg.RetryDelays, Errors: arg.Errors, ChainMax: arg.ChainMax, ChainPartitions: arg.ChainPartitions,
			ChainLimit: arg.ChainLimit,
		})
		if err != nil {
			return f, fmt.Errorf("finishing on the Citus worker of partition %d: %w", arg.PartitionIds[0], err)
		}
		rs := make([]dbgen.TaskFinishRow, len(rows))
		for i, r := range rows {
			rs[i] = dbgen.TaskFinishRow(r)
		}
		part := finished(rs)
		f.Applied = append(f.Applied, part.Applied...)
		f.HandedOver = append(f.HandedOver, part.HandedOver...)
		f.Claimable += part.Claimable
		hand.Max = max(hand.Max-len(part.HandedOver), 0)
	}
	return f, nil
}

// NextDue is PG.NextDue, a call per Citus worker holding the partitions,
// and while a kind has a limit one on the coordinator for the parked tasks
// of limited kinds (pgsched.queue_next_due_limited).
func (s *Citus) NextDue(ctx context.Context, db DBTX, partitions []int32) ([]DuePartition, error) {
	var rows []dbgen.QueueNextDueRow
	if s.limitsInUse(ctx, db) {
		rs, err := s.q.QueueNextDueLimited(ctx, s.db(db), partitions)
		if err != nil {
			return nil, fmt.Errorf("reading due partitions of limited kinds on the Citus coordinator: %w", err)
		}
		for _, r := range rs {
			rows = append(rows, dbgen.QueueNextDueRow(r))
		}
	}
	groups := s.byWorker(ctx, db, partitions)
	if groups == nil {
		due, err := s.PG.NextDue(ctx, db, partitions)
		if err != nil || len(rows) == 0 {
			return due, err
		}
		return mergeDue(due, dueRows(rows)), nil
	}
	for _, g := range groups {
		parts := pick(partitions, g)
		rs, err := s.q.QueueNextDueOn(ctx, s.db(db), dbgen.QueueNextDueOnParams{Anchor: parts[0], PartitionIds: parts})
		if err != nil {
			return nil, fmt.Errorf("reading due partitions on the Citus worker of partition %d: %w", parts[0], err)
		}
		for _, r := range rs {
			rows = append(rows, dbgen.QueueNextDueRow(r))
		}
	}
	return mergeDue(nil, dueRows(rows)), nil
}

// mergeDue is the due partitions of a and b, each once, at the earlier of
// its two times, most overdue first.
func mergeDue(a, b []DuePartition) []DuePartition {
	at := map[int]time.Duration{}
	for _, d := range append(a, b...) {
		if t, ok := at[d.Partition]; !ok || d.DueIn < t {
			at[d.Partition] = d.DueIn
		}
	}
	out := make([]DuePartition, 0, len(at))
	for p, t := range at {
		out = append(out, DuePartition{Partition: p, DueIn: t})
	}
	slices.SortFunc(out, func(x, y DuePartition) int {
		return cmp.Or(cmp.Compare(x.DueIn, y.DueIn), cmp.Compare(x.Partition, y.Partition))
	})
	return out
}

// limitsInUse says whether some kind has a limit, as read at most
// limitsTTL ago. A failed read counts as yes: the coordinator's claim of
// limited kinds then finds none, which costs a statement, not a task.
func (s *Citus) limitsInUse(ctx context.Context, db DBTX) bool {
	s.limitsMu.Lock()
	defer s.limitsMu.Unlock()
	if time.Since(s.limitsAt) < limitsTTL {
		return s.limitsOn
	}
	on, err := s.q.LimitsInUse(ctx, s.db(db))
	if err != nil {
		return true
	}
	s.limitsOn, s.limitsAt = on, time.Now()
	return on
}

// byWorker splits positions of partitions into groups, one per Citus
// worker holding them, in the order each worker first appears. It returns
// nil while no placement is known, and when db is a transaction: Citus
// delegates no call inside one, and a failed lookup must not abort the
// caller's transaction.
func (s *Citus) byWorker(ctx context.Context, db DBTX, partitions []int32) [][]int {
	if _, tx := db.(pgx.Tx); tx || len(partitions) == 0 {
		return nil
	}
	p := s.cur.Load()
	if p == nil || time.Since(p.read) > placementTTL {
		p = s.readPlacement(ctx, db, p)
	}
	if len(p.worker) == 0 {
		return nil
	}
	var groups [][]int
	index := map[string]int{}
	for i, part := range partitions {
		w := p.worker[part]
		g, ok := index[w]
		if !ok {
			g = len(groups)
			index[w] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// readPlacement reads the placement unless another caller did since old
// was current. A failed read is not the call's failure: the previous
// placement (or none, and the call goes through the coordinator, which
// serves every partition too) is used for another second.
func (s *Citus) readPlacement(ctx context.Context, db DBTX, old *placement) *placement {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.cur.Load(); cur != old {
		return cur
	}
	next := &placement{read: time.Now()}
	rows, err := s.q.PartitionRoutes(ctx, s.db(db))
	if err != nil {
		next.read = next.read.Add(time.Second - placementTTL)
		if old != nil {
			next.worker = old.worker
		}
	} else {
		next.worker = make(map[int32]string, len(rows))
		for _, r := range rows {
			next.worker[r.PartitionID] = r.Worker
		}
	}
	if neg, err := s.q.PriorityNegativeInUse(ctx, s.db(db)); err == nil {
		next.negative = neg
	} else if old != nil {
		next.negative = old.negative
	}
	s.cur.Store(next)
	return next
}

// pick returns the elements of xs at the positions.
func pick[T any](xs []T, positions []int) []T {
	out := make([]T, len(positions))
	for i, p := range positions {
		out[i] = xs[p]
	}
	return out
}

// SetLimit is PG.SetLimit; this Store's claims see the limit at once
// (other processes' within limitsTTL).
func (s *Citus) SetLimit(ctx context.Context, db DBTX, kind string, l Limit) (bool, error) {
	fresh, err := s.PG.SetLimit(ctx, db, kind, l)
	s.limitsMu.Lock()
	s.limitsAt = time.Time{}
	s.limitsMu.Unlock()
	return fresh, err
}
