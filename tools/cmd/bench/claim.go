package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedtype"
)

// claimLatency measures, for each -claim-pending size, how long a node's
// claim path takes (the read of its due partitions, then the claim from
// them) for one due task while that many tasks wait an hour ahead. Values:
// p50 and p99 per size, then the last size's over the first's.
func (b *bench) claimLatency(ctx context.Context) ([]float64, error) {
	var out []float64
	for _, pending := range b.claimPending {
		lat, err := b.claimRun(ctx, pending)
		if err != nil {
			return nil, fmt.Errorf("%d pending: %w", pending, err)
		}
		out = append(out, percentiles(lat, 50, 99)...)
	}
	if n := len(b.claimPending); n > 1 {
		out = append(out, out[2*(n-1)]/out[0], out[2*(n-1)+1]/out[1])
	}
	return out, nil
}

// claimRun enqueues one due task at a time and times the claim path a
// worker's loop runs for it (store.NextDue over the node's partitions, then
// store.Claim from those due), as many times as fit in -claim-duration;
// each task is then finished, untimed, so the table stays as loaded. The
// claim statements are the worker's own; timing them directly keeps the
// figure about the claim, where a start lateness would mostly measure the
// worker's timers (tasks are claimed ahead of their time).
func (b *bench) claimRun(ctx context.Context, pending int) ([]time.Duration, error) {
	pool, c, schema, cleanup, err := b.fresh(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if err := enqueueLoad(ctx, c, pending, 0, time.Hour); err != nil {
		return nil, err
	}
	// Tasks pending for a while have been vacuumed and written out.
	if _, err := pool.Exec(ctx, "VACUUM (ANALYZE) "+schema+".heads, "+schema+".backlog"); err != nil {
		return nil, err
	}
	_, _ = pool.Exec(ctx, "CHECKPOINT")
	st, err := store.New(schema)
	if err != nil {
		return nil, err
	}
	set, err := st.Settings(ctx, pool)
	if err != nil {
		return nil, err
	}
	parts := make([]int32, set.PartitionCount)
	for i := range parts {
		parts[i] = int32(i)
	}
	const node = "bench-claim"
	lease, err := st.NodeRegister(ctx, pool, node, "bench", time.Hour, "bench", os.Getpid(), false, 0)
	if err != nil {
		return nil, err
	}
	var lat []time.Duration
	deadline := time.Now().Add(b.claimDuration)
	for i := 0; time.Now().Before(deadline); i++ {
		if _, err := c.Schedule(ctx, pgsched.Task{OrderingID: fmt.Sprint("d", i), ScheduledAt: time.Now()}); err != nil {
			return nil, err
		}
		start := time.Now()
		next, err := st.NextDue(ctx, pool, parts)
		if err != nil {
			return nil, err
		}
		var due []int32
		for _, p := range next {
			if p.DueIn <= 0 {
				due = append(due, int32(p.Partition))
			}
		}
		jobs, err := st.Claim(ctx, pool, node, lease.Epoch, due, 1, 0)
		lat = append(lat, time.Since(start))
		if err != nil {
			return nil, err
		}
		if len(jobs) != 1 {
			return nil, fmt.Errorf("claim %d took %d tasks, want the one due", i, len(jobs))
		}
		j := jobs[0]
		if _, err := st.Finish(ctx, pool, node, lease.Epoch, []store.Outcome{{
			Partition: j.Partition, OrderingID: j.OrderingID, ID: j.ID, ClaimedAt: j.ClaimedAt, Outcome: pgschedtype.OutcomeCompleted,
		}}, store.Handover{}); err != nil {
			return nil, err
		}
	}
	if len(lat) < 100 {
		return nil, fmt.Errorf("only %d claims in %s: -claim-duration too short", len(lat), b.claimDuration)
	}
	return lat, nil
}
