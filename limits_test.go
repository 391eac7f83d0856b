package pgsched_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
)

// TestLimitMaxStartsInEveryWindow: a kind limited to 10 starts a second,
// run by two workers with room for 20 each: in no second (any window of
// one second, by the database's clock of each start, the claim that
// granted it) do more than 10 start, and 60 tasks take about 5 seconds
// (printed).
func TestLimitMaxStartsInEveryWindow(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	_, err := b.client.SetLimit(ctx, "paced", pgsched.Limit{MaxStarts: 10, Per: time.Second})
	require.NoError(t, err)
	var mu sync.Mutex
	var starts []time.Time
	handler := pgsched.HandlerFunc(func(_ context.Context, job *pgsched.Job) error {
		mu.Lock()
		starts = append(starts, job.ClaimedAt)
		mu.Unlock()
		return nil
	})
	startLimitWorkers(t, b, "paced-", "paced", handler)
	tasks := make([]pgsched.Task, 60)
	for i := range tasks {
		tasks[i] = pgsched.Task{OrderingID: fmt.Sprint("p-", i), ScheduledAt: time.Now(), Kind: "paced"}
	}
	began := time.Now()
	_, err = b.client.ScheduleMany(ctx, tasks)
	require.NoError(t, err)
	waitDrained(t, b, time.Minute)
	t.Logf("60 tasks at 10 a second in %s", time.Since(began).Round(10*time.Millisecond))

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, starts, 60)
	require.LessOrEqual(t, mostInASecond(starts), 10, "starts in any second")
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	require.GreaterOrEqual(t, starts[59].Sub(starts[0]), 5*time.Second, "60 starts at 10 a second span at least 5 s")
}

// TestLimitBadInputSameFromGoAndSQL: every bad limit is refused, with the
// same reason from the Go client (before any round trip) and from
// pgsched.set_limit, and nothing is written.
func TestLimitBadInputSameFromGoAndSQL(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	for _, c := range []struct {
		kind string
		l    pgsched.Limit
		sql  string
	}{
		{"", pgsched.Limit{MaxRunning: 1}, "'', max_running => 1"},
		{"k", pgsched.Limit{}, "'k'"},
		{"k", pgsched.Limit{MaxRunning: -2}, "'k', max_running => -2"},
		{"k", pgsched.Limit{MaxStarts: 5}, "'k', max_starts => 5"},
		{"k", pgsched.Limit{Per: time.Second}, "'k', per => '1 second'"},
		{"k", pgsched.Limit{MaxStarts: 10001, Per: time.Second}, "'k', max_starts => 10001, per => '1 second'"},
		{"k", pgsched.Limit{MaxStarts: 1, Per: 25 * time.Hour}, "'k', max_starts => 1, per => '25 hours'"},
		{"k", pgsched.Limit{MaxStarts: 1, Per: -1500 * time.Millisecond}, "'k', max_starts => 1, per => '-1.5 seconds'"},
		{strings.Repeat("k", 256), pgsched.Limit{MaxRunning: 1}, "repeat('k', 256), max_running => 1"},
	} {
		_, goErr := b.client.SetLimit(ctx, c.kind, c.l)
		require.ErrorIs(t, goErr, pgsched.ErrInvalidTask, c.sql)
		_, sqlErr := b.db.Pool.Exec(ctx, "SELECT "+b.db.Schema+".set_limit("+c.sql+")")
		require.Error(t, sqlErr, c.sql)
		reason := goErr.Error()[strings.LastIndex(goErr.Error(), ": ")+2:]
		require.Contains(t, sqlErr.Error(), reason, "the same words from SQL as from Go")
	}
	ls, err := b.client.Limits(ctx)
	require.NoError(t, err)
	require.Empty(t, ls, "nothing written")
}

// startLimitWorkers starts two workers, prefix-0 and prefix-1, with room
// for 20 tasks each, running kind with handler.
func startLimitWorkers(t *testing.T, b clientBundle, prefix, kind string, handler pgsched.Handler) {
	t.Helper()
	for i := range 2 {
		cfg := fastConfig(b.db.Schema)
		cfg.NodeID = fmt.Sprint(prefix, i)
		cfg.Concurrency = 20
		cfg.Handlers = map[string]pgsched.Handler{kind: handler}
		startWorker(t, b.db, cfg)
	}
}

// mostInASecond is the most of ts in any window of one second.
func mostInASecond(ts []time.Time) int {
	ts = slices.SortedFunc(slices.Values(ts), func(a, b time.Time) int { return a.Compare(b) })
	most := 0
	for i, s := range ts {
		in := 0
		for _, o := range ts[i:] {
			if o.Sub(s) < time.Second {
				in++
			}
		}
		most = max(most, in)
	}
	return most
}

// TestLimitMaxStartsPerGroup: "each customer at most 5 calls a second":
// a kind whose rate bounds each group apart, two groups of 15 tasks, two
// workers with 20 handlers each. In no second does a group start more
// than 5, while the kind as a whole starts more than 5 in some second
// (the groups are bounded apart, not together), and each group's 15
// take at least two seconds (printed: about three).
func TestLimitMaxStartsPerGroup(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	_, err := b.client.SetLimit(ctx, "paced-per-customer", pgsched.Limit{MaxStarts: 5, Per: time.Second, PerGroup: true})
	require.NoError(t, err)
	var mu sync.Mutex
	starts := map[string][]time.Time{}
	handler := pgsched.HandlerFunc(func(_ context.Context, job *pgsched.Job) error {
		mu.Lock()
		starts[job.GroupKey] = append(starts[job.GroupKey], job.ClaimedAt)
		mu.Unlock()
		return nil
	})
	startLimitWorkers(t, b, "paced-group-", "paced-per-customer", handler)
	var tasks []pgsched.Task
	for _, g := range []string{"acme", "globex"} {
		for i := range 15 {
			tasks = append(tasks, pgsched.Task{OrderingID: fmt.Sprint(g, "-", i), ScheduledAt: time.Now(),
				Kind: "paced-per-customer", GroupKey: g})
		}
	}
	began := time.Now()
	_, err = b.client.ScheduleMany(ctx, tasks)
	require.NoError(t, err)
	waitDrained(t, b, time.Minute)
	t.Logf("2 groups of 15 at 5 a second each in %s", time.Since(began).Round(10*time.Millisecond))

	mu.Lock()
	defer mu.Unlock()
	var all []time.Time
	for _, g := range []string{"acme", "globex"} {
		ts := starts[g]
		require.Len(t, ts, 15, "group %s", g)
		require.LessOrEqual(t, mostInASecond(ts), 5, "group %s started more than 5 in a second", g)
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		require.GreaterOrEqual(t, ts[14].Sub(ts[0]), 2*time.Second, "15 starts at 5 a second span at least 2 s")
		all = append(all, ts...)
	}
	require.Greater(t, mostInASecond(all), 5, "the rate bounds each group apart, not the kind")
	ls, err := b.client.Limits(ctx)
	require.NoError(t, err)
	require.Len(t, ls, 1)
	require.Equal(t, pgsched.Limit{MaxStarts: 5, Per: time.Second, PerGroup: true}, ls[0].Limit)
}

// TestLimitStartsHigherPriorityFirst: within a limited kind, priority
// still wins: a kind limited to 2 at once with 30 due tasks at priority 0,
// then 3 at priority 10 enqueued after them: the 3 start among the first
// 8, not after the 30 that were due before them.
func TestLimitStartsHigherPriorityFirst(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	_, err := b.client.SetLimit(ctx, "narrow", pgsched.Limit{MaxRunning: 2})
	require.NoError(t, err)
	var mu sync.Mutex
	var order []int32
	handler := pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error {
		mu.Lock()
		order = append(order, job.Priority)
		mu.Unlock()
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
		return nil
	})
	low := make([]pgsched.Task, 30)
	for i := range low {
		low[i] = pgsched.Task{OrderingID: fmt.Sprint("low-", i), ScheduledAt: time.Now(), Kind: "narrow"}
	}
	_, err = b.client.ScheduleMany(ctx, low)
	require.NoError(t, err)
	cfg := fastConfig(b.db.Schema)
	cfg.Concurrency = 10
	cfg.Handlers = map[string]pgsched.Handler{"narrow": handler}
	startWorker(t, b.db, cfg)
	eventually(t, 30*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(order) > 0 }, "the first task starts")
	high := make([]pgsched.Task, 3)
	for i := range high {
		high[i] = pgsched.Task{OrderingID: fmt.Sprint("high-", i), ScheduledAt: time.Now(), Kind: "narrow", Priority: 10}
	}
	_, err = b.client.ScheduleMany(ctx, high)
	require.NoError(t, err)
	waitDrained(t, b, time.Minute)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, order, 33)
	var at []int
	for i, p := range order {
		if p == 10 {
			at = append(at, i+1)
		}
	}
	t.Logf("priority-10 tasks started as number %v of 33", at)
	require.Len(t, at, 3)
	require.LessOrEqual(t, at[2], 8, "the 3 of priority 10 start among the first 8")
}

// TestLimitServesGroupsInTurn: fair share. A limited kind with 400 due
// tasks of group a, then 20 of group b enqueued after them: the kind's
// room goes to the groups in turn, so b's 20 finish among the first 80 of
// the 420, not after a's 400.
func TestLimitServesGroupsInTurn(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	_, err := b.client.SetLimit(ctx, "tenant-work", pgsched.Limit{MaxRunning: 4})
	require.NoError(t, err)
	var tasks []pgsched.Task
	now := time.Now()
	for i := range 400 {
		tasks = append(tasks, pgsched.Task{OrderingID: fmt.Sprint("a-", i), ScheduledAt: now, Kind: "tenant-work", GroupKey: "a"})
	}
	_, err = b.client.ScheduleMany(ctx, tasks)
	require.NoError(t, err)
	tasks = tasks[:0]
	for i := range 20 {
		tasks = append(tasks, pgsched.Task{OrderingID: fmt.Sprint("b-", i), ScheduledAt: time.Now(), Kind: "tenant-work", GroupKey: "b"})
	}
	_, err = b.client.ScheduleMany(ctx, tasks)
	require.NoError(t, err)

	order := groupsInStartOrder(t, b, "tenant-work", 20)
	require.Len(t, order, 420)
	bFirst80 := 0
	for _, g := range order[:80] {
		if g == "b" {
			bFirst80++
		}
	}
	require.Equal(t, 20, bFirst80, "b's 20 among the first 80 started")
}

// TestLimitPerGroupAcrossWorkers: "each customer at most 2 at once": a
// kind limited per group, three groups of 15 tasks, two workers with 20
// handlers each: no group ever has more than 2 running, the groups run
// side by side, and every task runs.
func TestLimitPerGroupAcrossWorkers(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	_, err := b.client.SetLimit(ctx, "per-customer", pgsched.Limit{MaxRunning: 2, PerGroup: true})
	require.NoError(t, err)
	var mu sync.Mutex
	running, most := map[string]int{}, map[string]int{}
	total, mostTotal, ran := 0, 0, 0
	handler := pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error {
		mu.Lock()
		running[job.GroupKey]++
		total++
		most[job.GroupKey] = max(most[job.GroupKey], running[job.GroupKey])
		mostTotal = max(mostTotal, total)
		mu.Unlock()
		select {
		case <-time.After(30 * time.Millisecond):
		case <-ctx.Done():
		}
		mu.Lock()
		running[job.GroupKey]--
		total--
		ran++
		mu.Unlock()
		return nil
	})
	startLimitWorkers(t, b, "per-group-", "per-customer", handler)
	var tasks []pgsched.Task
	for _, g := range []string{"acme", "globex", "initech"} {
		for i := range 15 {
			tasks = append(tasks, pgsched.Task{OrderingID: fmt.Sprint(g, "-", i), ScheduledAt: time.Now(), Kind: "per-customer", GroupKey: g})
		}
	}
	_, err = b.client.ScheduleMany(ctx, tasks)
	require.NoError(t, err)
	waitDrained(t, b, time.Minute)

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 45, ran)
	for g, n := range most {
		require.LessOrEqual(t, n, 2, "group %s ran %d at once", g, n)
	}
	require.Greater(t, mostTotal, 2, "the groups ran side by side")
}

// groupsInStartOrder runs kind's tasks on one worker with concurrency
// handlers until none is left, and returns their group_keys in the order
// the handlers started.
func groupsInStartOrder(t *testing.T, b clientBundle, kind string, concurrency int) []string {
	t.Helper()
	var mu sync.Mutex
	var order []string
	cfg := fastConfig(b.db.Schema)
	cfg.Concurrency = concurrency
	cfg.Handlers = map[string]pgsched.Handler{kind: pgsched.HandlerFunc(func(_ context.Context, job *pgsched.Job) error {
		mu.Lock()
		order = append(order, job.GroupKey)
		mu.Unlock()
		return nil
	})}
	startWorker(t, b.db, cfg)
	waitDrained(t, b, time.Minute)
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(order)
}
