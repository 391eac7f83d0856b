package store

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// On a schema distributed over Citus a worker node's claims, finishes and
// due-partition reads go to the Citus workers holding the partitions, one
// call per Citus worker: pgsched.claim_due_on, finish_tasks_on and
// queue_next_due_on are delegated functions there (see
// db/functions/citus_delegate.sql), so the coordinator routes the call
// instead of running its PL/pgSQL and routing each statement itself, and
// the call commits on that worker alone. The store learns where each
// partition lives from pgsched.citus_routes and reads it again every
// placementTTL; a partition moved meanwhile is still served, through the
// worker the call went to. On one PostgreSQL the lookup finds no rows and
// the single-node statements run as before; so it does on a Citus schema
// not yet migrated to delegated calls.
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

// placement is where each partition's shard lives, as read at read.
type placement struct {
	read   time.Time
	worker map[int32]string // empty: not distributed over Citus
}

// citusPlacement caches the placement for a Store.
type citusPlacement struct {
	mu  sync.Mutex // one read at a time
	cur atomic.Pointer[placement]
}

// byWorker splits positions of partitions into groups, one per Citus
// worker holding them, in the order each worker first appears. It returns
// nil when the schema is not distributed over Citus, and when db is a
// transaction: Citus delegates no call inside one, and a failed lookup
// must not abort the caller's transaction.
func (s *Store) byWorker(ctx context.Context, db DBTX, partitions []int32) [][]int {
	if _, tx := db.(pgx.Tx); tx || len(partitions) == 0 {
		return nil
	}
	p := s.citus.cur.Load()
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
func (s *Store) readPlacement(ctx context.Context, db DBTX, old *placement) *placement {
	s.citus.mu.Lock()
	defer s.citus.mu.Unlock()
	if cur := s.citus.cur.Load(); cur != old {
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
	s.citus.cur.Store(next)
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
