package dispatch_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/dispatch"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedtype"
)

// overlapStore is a store whose finishes record how many ran at once,
// and whether two at once wrote outcomes of partitions of the same
// parity; each lasts a little longer than it would, so that a second one
// the finisher starts meanwhile is seen.
type overlapStore struct {
	store.Store
	mu        sync.Mutex
	now, most int
	parities  [2]int // finishes running with outcomes of even, odd partitions
	shared    bool   // two at once wrote outcomes of one parity
}

func (s *overlapStore) Finish(ctx context.Context, db store.DBTX, node string, epoch int64, outs []store.Outcome,
	hand store.Handover) (store.Finished, error) {
	var has [2]bool
	for _, o := range outs {
		has[o.Partition%2] = true
	}
	s.mu.Lock()
	s.now++
	s.most = max(s.most, s.now)
	for p := range has {
		if has[p] {
			s.shared = s.shared || s.parities[p] > 0
			s.parities[p]++
		}
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.now--
		for p := range has {
			if has[p] {
				s.parities[p]--
			}
		}
		s.mu.Unlock()
	}()
	time.Sleep(20 * time.Millisecond)
	return s.Store.Finish(ctx, db, node, epoch, outs, hand)
}

// TestSecondFinishOnlyForMostPartitions: while finishes hand successors
// over, a node serving more than half of the partitions runs two finish
// statements at once, one for the outcomes of its even partitions and
// one for the odd, and a node serving fewer (it shares the work with
// others) one, so that several nodes do not crowd the database. Both
// nodes here serve the same 16 partitions of a schema of 64 (told as 16
// and as 64) and run 200 ordering_ids of 5 tasks each to the end.
func TestSecondFinishOnlyForMostPartitions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		count, most int
	}{{count: 64, most: 1}, {count: 16, most: 2}} {
		t.Run(fmt.Sprintf("partitions %d", tc.count), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, st, client, node := newNode(t, pgtest.SchemaOptions{Partitions: 64}, 5*time.Second)
			var served []int32
			for p := range int32(16) {
				served = append(served, p)
			}
			var tasks []pgsched.Task
			due := time.Now().Add(-time.Second)
			for i := 0; len(tasks) < 200*5; i++ {
				id := fmt.Sprint("o", i)
				var p int32
				require.NoError(t, db.Pool.QueryRow(ctx, fmt.Sprintf("SELECT %s.partition_of($1, 64)", db.Schema), id).Scan(&p))
				if p >= 16 {
					continue
				}
				for j := range 5 {
					tasks = append(tasks, pgsched.Task{OrderingID: id, ScheduledAt: due.Add(time.Duration(j) * time.Millisecond)})
				}
			}
			_, err := client.ScheduleMany(ctx, tasks)
			require.NoError(t, err)

			ov := &overlapStore{Store: st}
			var done atomic.Int64
			all := make(chan struct{})
			d, err := dispatch.New(dispatch.Config{
				Store: ov, DB: db.Pool, Node: node, Partitions: func() []int32 { return served }, PartitionCount: tc.count,
				Concurrency: 100, Prefetch: 300, PollInterval: 100 * time.Millisecond, ClaimAhead: 25 * time.Millisecond,
				FinishBatch: 1000, FinishDelay: time.Millisecond, DrainTimeout: 10 * time.Second,
				Exec: func(_ context.Context, job *dispatch.Job) dispatch.Result {
					if done.Add(1) == int64(len(tasks)) {
						close(all)
					}
					return dispatch.Result{Outcome: pgschedtype.OutcomeCompleted}
				},
			})
			require.NoError(t, err)
			run(t, node, d)
			select {
			case <-all:
			case <-time.After(pgtest.Patience(60 * time.Second)):
				t.Fatalf("%d of %d tasks ran", done.Load(), len(tasks))
			}
			ov.mu.Lock()
			defer ov.mu.Unlock()
			require.Equal(t, tc.most, ov.most, "finish statements at once at most")
			require.False(t, ov.shared, "two finish statements at once wrote outcomes of partitions of one parity")
		})
	}
}
