package pgsched_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
)

// TestSnoozeRunsLaterWithoutAnAttempt: a handler returning Snooze(d) gets
// its task again after d with the same attempt number, although the kind
// allows one attempt (a failure would kill it); no error is recorded; the
// ordering_id's next task waits behind the snoozed one; a TxHandler's
// snooze commits nothing; the throughput history counts the snoozes.
func TestSnoozeRunsLaterWithoutAnAttempt(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	s := b.db.Schema
	_, err := b.db.Pool.Exec(ctx, "CREATE TABLE "+s+".side_effects (key text)")
	require.NoError(t, err)

	type run struct {
		key     string
		attempt int
		at      time.Time
	}
	var mu sync.Mutex
	var runs []run
	seen := func(key string) int {
		n := 0
		for _, r := range runs {
			if r.key == key {
				n++
			}
		}
		return n
	}
	const wait = 300 * time.Millisecond
	cfg := fastConfig(s)
	cfg.Retry = pgsched.RetryPolicy{MaxAttempts: 1}
	cfg.Handlers = map[string]pgsched.Handler{
		"poll": pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error {
			mu.Lock()
			defer mu.Unlock()
			first := seen(job.UniquenessKey) == 0
			runs = append(runs, run{job.UniquenessKey, job.Attempt, time.Now()})
			if first && job.UniquenessKey == "a" {
				return pgsched.Snooze(wait)
			}
			return nil
		}),
	}
	cfg.TxHandlers = map[string]pgsched.TxHandler{
		"txpoll": pgsched.TxHandlerFunc(func(ctx context.Context, tx pgx.Tx, job *pgsched.Job) error {
			if _, err := tx.Exec(ctx, "INSERT INTO "+s+".side_effects VALUES ($1)", job.UniquenessKey); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			first := seen(job.UniquenessKey) == 0
			runs = append(runs, run{job.UniquenessKey, job.Attempt, time.Now()})
			if first {
				return pgsched.Snooze(wait)
			}
			return nil
		}),
	}
	outcomes := watchOutcomes(&cfg)
	startWorker(t, b.db, cfg)
	now := time.Now()
	_, err = b.client.ScheduleMany(ctx, []pgsched.Task{
		{OrderingID: "o", ScheduledAt: now, UniquenessKey: "a", Kind: "poll"},
		{OrderingID: "o", ScheduledAt: now.Add(time.Millisecond), UniquenessKey: "b", Kind: "poll"},
		{OrderingID: "tx", ScheduledAt: now, UniquenessKey: "t", Kind: "txpoll"},
	})
	require.NoError(t, err)
	outcomes.completed(t, 3, 10*time.Second)

	mu.Lock()
	var order []string
	var a, tx []run
	for _, r := range runs {
		switch r.key {
		case "a":
			a = append(a, r)
		case "t":
			tx = append(tx, r)
		}
		if r.key != "t" {
			order = append(order, r.key)
		}
	}
	mu.Unlock()
	require.Equal(t, []string{"a", "a", "b"}, order, "b waited behind the snoozed a")
	for _, rs := range [][]run{a, tx} {
		require.Len(t, rs, 2)
		require.Equal(t, 1, rs[0].attempt)
		require.Equal(t, 1, rs[1].attempt, "a snooze uses no attempt")
		require.GreaterOrEqual(t, rs[1].at.Sub(rs[0].at), wait-10*time.Millisecond, "not before the snooze ends")
	}
	require.Equal(t, 2, outcomes.count("snooze"))
	require.Zero(t, outcomes.count("retry"))

	var effects int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+s+".side_effects").Scan(&effects))
	require.Equal(t, 1, effects, "the snoozed TxHandler run committed nothing")
	var dead int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+s+".dead_tasks").Scan(&dead))
	require.Zero(t, dead)
	eventually(t, 10*time.Second, func() bool {
		var snoozed int64
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT coalesce(sum(snoozed), 0)::bigint FROM "+s+".throughput").Scan(&snoozed))
		return snoozed == 2
	}, "the throughput history counts both snoozes")
}
