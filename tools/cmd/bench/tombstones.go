package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// tombstoneWorkload measures what the completion records of a busy
// installation cost the hot path: with each size of -tombstones present
// (spread over the retention window's daily partitions, as a steady load
// leaves them), the rate of enqueueing b.n new tasks due now (each probes
// today's partition for its key's tombstone) and of burning them down
// (each completion writes one). The ratios compare the largest size with
// the smallest.
func (b *bench) tombstoneWorkload() workload {
	var labels []string
	for _, n := range b.tombstones {
		labels = append(labels,
			fmt.Sprintf("%s completions kept: enqueue %d due, tasks/s", short(n), b.n),
			fmt.Sprintf("%s completions kept: burn-down, tasks/s", short(n)))
	}
	if k := len(b.tombstones); k > 1 {
		first, last := short(b.tombstones[0]), short(b.tombstones[k-1])
		labels = append(labels,
			fmt.Sprintf("enqueue cost %s / %s completions kept", last, first),
			fmt.Sprintf("finish cost %s / %s completions kept", last, first))
	}
	return workload{[]string{"tombstones", "f"}, labels, b.tombstoneRuns}
}

func (b *bench) tombstoneRuns(ctx context.Context) ([]float64, error) {
	var out []float64
	for _, n := range b.tombstones {
		enq, burn, err := b.tombstoneRun(ctx, n)
		if err != nil {
			return nil, fmt.Errorf("%d completions: %w", n, err)
		}
		out = append(out, enq, burn)
	}
	if k := len(b.tombstones); k > 1 {
		// Cost is the inverse of the rate.
		out = append(out, out[0]/out[2*(k-1)], out[1]/out[2*(k-1)+1])
	}
	return out, nil
}

func (b *bench) tombstoneRun(ctx context.Context, n int) (enqRate, burnRate float64, err error) {
	pool, c, schema, cleanup, err := b.fresh(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer cleanup()
	if err := fillCompletions(ctx, pool, schema, n); err != nil {
		return 0, 0, err
	}
	start := time.Now()
	if err := enqueueLoad(ctx, c, b.n, 0, -time.Second); err != nil {
		return 0, 0, err
	}
	enqRate = float64(b.n) / time.Since(start).Seconds()
	burnRate, err = b.burnLoaded(ctx, pool, schema)
	return enqRate, burnRate, err
}

// fillCompletions writes n completion records over the last six days and
// today (the default retention is seven), in chunks, then vacuums them, as
// a table that has held them a while would be.
func fillCompletions(ctx context.Context, pool *pgxpool.Pool, schema string, n int) error {
	if n == 0 {
		return nil
	}
	if _, err := pool.Exec(ctx, "SELECT "+schema+".ensure_completion_partitions(now() - interval '6 days', 8)"); err != nil {
		return err
	}
	began := time.Now()
	const chunk = 5_000_000
	for from := 0; from < n; from += chunk {
		to := min(from+chunk, n)
		// Spread evenly from six days ago to a minute ago.
		_, err := pool.Exec(ctx, `INSERT INTO `+schema+`.completions (partition_id, ordering_id, scheduled_at, uniqueness_key, kind, attempt, node_id, completed_at)
			SELECT i % 64, 'done-' || i, t, '', 'k', 1, 'bench', t
			FROM generate_series($1::bigint, $2::bigint - 1) AS i,
			     LATERAL (SELECT now() - interval '6 days' + (i::float8 / $3) * (interval '6 days' - interval '1 minute') AS t) x`,
			from, to, n)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "tombstones: %d of %d written (%s)\n", to, n, time.Since(began).Round(time.Second))
	}
	_, err := pool.Exec(ctx, "VACUUM (ANALYZE) "+schema+".completions")
	return err
}
