package pgsched_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
)

// startLog records the order handlers start in.
type startLog struct {
	mu   sync.Mutex
	jobs []pgsched.Job
}

func (l *startLog) add(j *pgsched.Job) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.jobs = append(l.jobs, *j)
}

func (l *startLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.jobs)
}

// ids returns the ordering_ids in start order.
func (l *startLog) ids() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, len(l.jobs))
	for i, j := range l.jobs {
		out[i] = j.OrderingID
	}
	return out
}

// TestPriorityOvertakesBacklog is issue 32's acceptance test: on one
// process with two handlers, 300 due tasks of the default priority, then
// 10 of a higher one: the 10 are among the first 40 to start. The first
// handlers hold until the 10 are enqueued, so the backlog is being worked
// through when they arrive. The backlog is in the first half of the
// partitions, the 10 in the second, which the worker did not read as due
// (and on Citus, on the other Citus worker); a poll interval longer than
// the test leaves finding them to the claim.
func TestPriorityOvertakesBacklog(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	var log startLog
	release := make(chan struct{})
	cfg := fastConfig(b.db.Schema)
	cfg.Concurrency = 2
	cfg.PollInterval = time.Minute
	cfg.Handlers = map[string]pgsched.Handler{"*": pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error {
		log.add(job)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})}
	outcomes := watchOutcomes(&cfg)
	startWorker(t, b.db, cfg)

	parts := len(allPartitions(t, b))
	ids := func(prefix string, n int, half func(p int) bool) []string {
		var out []string
		for i := 0; len(out) < n; i++ {
			if id := fmt.Sprint(prefix, i); half(pgsched.Partition(id, parts)) {
				out = append(out, id)
			}
		}
		return out
	}
	now := time.Now()
	var low []pgsched.Task
	for _, id := range ids("low-", 300, func(p int) bool { return p < parts/2 }) {
		low = append(low, pgsched.Task{OrderingID: id, ScheduledAt: now})
	}
	_, err := b.client.ScheduleMany(ctx, low)
	require.NoError(t, err)
	eventually(t, 10*time.Second, func() bool { return log.len() == 2 }, "both handlers busy")

	var high []pgsched.Task
	for _, id := range ids("high-", 10, func(p int) bool { return p >= parts/2 }) {
		high = append(high, pgsched.Task{OrderingID: id, ScheduledAt: time.Now(), Priority: 10, GroupKey: "vip"})
	}
	_, err = b.client.ScheduleMany(ctx, high)
	require.NoError(t, err)
	close(release)
	outcomes.completed(t, 310, 30*time.Second)

	started := log.ids()
	require.Len(t, started, 310)
	for _, h := range high {
		i := slices.Index(started, h.OrderingID)
		require.Less(t, i, 40, "%s started as number %d; the first 40: %v", h.OrderingID, i+1, started[:40])
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, j := range log.jobs {
		if j.Priority != 0 {
			require.Equal(t, [2]any{int32(10), "vip"}, [2]any{j.Priority, j.GroupKey}, "the handler sees the task's own")
		}
	}
}

// TestPriorityOrder: with one task at a time, tasks start by priority
// (negative ones after the default), an overwrite from SQL changes a
// task's priority, and within one ordering_id order wins: a task of the
// highest priority behind one of the default waits for it.
func TestPriorityOrder(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	at := time.Now().Truncate(time.Microsecond)
	sql := func(q string, args ...any) {
		t.Helper()
		_, err := b.db.Pool.Exec(ctx, "SELECT "+b.db.Schema+"."+q, args...)
		require.NoError(t, err, q)
	}
	_, err := b.client.ScheduleMany(ctx, []pgsched.Task{
		{OrderingID: "neg", ScheduledAt: at.Add(-2 * time.Second), Priority: -5},
		{OrderingID: "zero", ScheduledAt: at},
		{OrderingID: "three", ScheduledAt: at, Priority: 3},
		{OrderingID: "o", ScheduledAt: at, UniquenessKey: "1"},
		{OrderingID: "o", ScheduledAt: at.Add(time.Millisecond), UniquenessKey: "2", Priority: 20},
	})
	require.NoError(t, err)
	sql("schedule('ten', $1, kind => 'k')", at)
	sql("schedule('ten', $1, kind => 'k', priority => 10, group_key => 'tenant-a')", at) // an overwrite
	sql("schedule_many(ARRAY['neg2'], ARRAY[$1::timestamptz], priorities => ARRAY[-5])", at)

	var log startLog
	cfg := fastConfig(b.db.Schema)
	cfg.Concurrency, cfg.Prefetch = 1, -1
	cfg.Handlers = map[string]pgsched.Handler{"*": pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error {
		log.add(job)
		return nil
	})}
	outcomes := watchOutcomes(&cfg)
	startWorker(t, b.db, cfg)
	outcomes.completed(t, 7, 20*time.Second)

	// The worker claims as soon as a handler returns, before that task's
	// outcome is written: o's second becomes a head (and is handed over or
	// claimed first) only once o's first is recorded, so where it starts
	// among the rest depends on that write.
	ids := log.ids()
	rest := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == "o" })
	require.Equal(t, []string{"ten", "three", "zero"}, rest[:3], "the highest priorities first: %v", ids)
	require.ElementsMatch(t, []string{"neg", "neg2"}, rest[3:], "negative priorities last, whatever their time: %v", ids)
	require.Less(t, slices.Index(ids, "o"), slices.Index(ids, "neg2"), "o's first, of the default priority, before them: %v", ids)
	log.mu.Lock()
	defer log.mu.Unlock()
	var oKeys []string
	for _, j := range log.jobs {
		switch j.OrderingID {
		case "ten":
			require.Equal(t, [2]any{int32(10), "tenant-a"}, [2]any{j.Priority, j.GroupKey}, "as the overwrite left it")
		case "o":
			oKeys = append(oKeys, fmt.Sprint(j.UniquenessKey, "@", j.Priority))
		}
	}
	require.Equal(t, []string{"1@0", "2@20"}, oKeys, "order within an ordering_id wins over priority")
}
