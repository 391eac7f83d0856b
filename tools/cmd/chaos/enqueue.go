package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgsched/pgsched"
)

// dueGrid is the grid every task's due time lies on, counted from the
// window's start. Tasks fall due in bursts, one per tick, so a freeze timed
// just before a tick (see plan) catches every node holding tasks it has
// claimed ahead (pgsched.WorkerConfig.ClaimAhead) but not started: the moment a
// node thawed past its lease must not run them.
const dueGrid = 100 * time.Millisecond

// spreadTasks spreads n tasks over ids ordering_ids and over the window
// from t0 (which lies on dueGrid). Task j of an ordering_id with m tasks
// falls due at a random tick of the j-th of m equal slots, so an
// ordering_id's tasks are due in increasing order (two may share a tick
// where a slot is shorter than dueGrid; pgsched then runs them in enqueue
// order) and the ordering_ids interleave. uniqueness_key is a zero-padded
// sequence number that increases with scheduled_at within an ordering_id,
// so a delivery's key says where it belongs.
func spreadTasks(rng *rand.Rand, n, ids int, t0 time.Time, window time.Duration) []pgsched.Task {
	out := make([]pgsched.Task, 0, n)
	width := len(strconv.Itoa(n))
	for i := range ids {
		m := n / ids
		if i < n%ids {
			m++
		}
		if m == 0 {
			continue
		}
		slot := window / time.Duration(m)
		id := fmt.Sprintf("order-%04d", i)
		for j := range m {
			offset := time.Duration(j)*slot + time.Duration(rng.Int64N(int64(slot)))
			at := t0.Add(offset.Truncate(dueGrid))
			out = append(out, pgsched.Task{
				OrderingID:    id,
				ScheduledAt:   at,
				UniquenessKey: fmt.Sprintf("%0*d", width, len(out)),
				Kind:          "chaos",
			})
		}
	}
	return out
}

// enqueue schedules every task in batches of about batch tasks, keeping an
// ordering_id's tasks in one batch (so the client's new-keys insert
// applies).
func enqueue(ctx context.Context, pool *pgxpool.Pool, schema string, all []pgsched.Task, batch int) error {
	client, err := pgsched.NewClient(pool, pgsched.ClientConfig{Schema: schema})
	if err != nil {
		return err
	}
	for start := 0; start < len(all); {
		end := min(start+batch, len(all))
		for end < len(all) && all[end].OrderingID == all[end-1].OrderingID {
			end++
		}
		results, err := client.ScheduleMany(ctx, all[start:end])
		if err != nil {
			return fmt.Errorf("enqueueing tasks %d..%d: %w", start, end-1, err)
		}
		for i, r := range results {
			if r != pgsched.Inserted {
				return fmt.Errorf("enqueueing %s: result %s, want %s", all[start+i].UniquenessKey, r, pgsched.Inserted)
			}
		}
		start = end
	}
	return nil
}
