package pgsched_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
)

// fastConfig has the short intervals tests use; never sleeps, only waits.
func fastConfig(schema string) pgsched.WorkerConfig {
	return pgsched.WorkerConfig{
		Schema: schema,
		// Three times as long on the one-machine Citus cluster, where a
		// loaded statement can take a second: a node must not lose its
		// lease to slowness alone (pgtest.Patience).
		LeaseTTL:            pgtest.Patience(time.Second),
		PollInterval:        200 * time.Millisecond,
		MaintenanceInterval: 100 * time.Millisecond,
		ClusterInterval:     100 * time.Millisecond,
		DrainTimeout:        2 * time.Second,
		Retry:               pgsched.RetryPolicy{MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond},
	}
}

func startWorker(t *testing.T, db *pgtest.DB, cfg pgsched.WorkerConfig) *pgsched.Worker {
	t.Helper()
	return startWorkerOn(t, db.Pool, cfg)
}

// startWorkerOn starts a worker on pool and stops it with the test.
func startWorkerOn(t *testing.T, pool *pgxpool.Pool, cfg pgsched.WorkerConfig) *pgsched.Worker {
	t.Helper()
	w, err := pgsched.NewWorker(pool, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	return w
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	within = pgtest.Patience(within)
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: "+msg, append([]any{within}, args...)...)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestWorkerRunsTasksInOrder(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	var mu sync.Mutex
	seen := map[string][]string{}
	var running sync.Map
	cfg := fastConfig(b.db.Schema)
	cfg.Handlers = map[string]pgsched.Handler{"*": pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error {
		if _, loaded := running.LoadOrStore(job.OrderingID, true); loaded {
			t.Errorf("two tasks of %s at once", job.OrderingID)
		}
		defer running.Delete(job.OrderingID)
		mu.Lock()
		seen[job.OrderingID] = append(seen[job.OrderingID], job.UniquenessKey)
		mu.Unlock()
		return nil
	})}
	cfg.Concurrency = 20
	outcomes := watchOutcomes(&cfg)
	startWorker(t, b.db, cfg)

	now := time.Now()
	var tasks []pgsched.Task
	for i := range 20 {
		for k := range 30 {
			tasks = append(tasks, pgsched.Task{OrderingID: fmt.Sprint("o", k), ScheduledAt: now.Add(time.Duration(i) * 10 * time.Millisecond), UniquenessKey: fmt.Sprintf("%03d", i)})
		}
	}
	_, err := b.client.ScheduleMany(context.Background(), tasks)
	require.NoError(t, err)
	outcomes.completed(t, 600, 20*time.Second)
	require.Equal(t, 0, countRows(t, b, "tasks"), "every outcome recorded")
	mu.Lock()
	defer mu.Unlock()
	for k := range 30 {
		got := seen[fmt.Sprint("o", k)]
		require.Len(t, got, 20)
		for i, u := range got {
			require.Equal(t, fmt.Sprintf("%03d", i), u)
		}
	}
	require.Equal(t, 0, countRows(t, b, "heads"))
	var done int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM "+b.db.Schema+".completions").Scan(&done))
	require.Equal(t, 600, done)

	// Enqueued again, by then perhaps past the grace window on a slow
	// server (Citus): widened, so the answer is about the completion.
	_, err = b.db.Pool.Exec(context.Background(), "SELECT "+b.db.Schema+".configure(grace => '1 hour')")
	require.NoError(t, err)
	res, err := b.client.Schedule(context.Background(), tasks[0])
	require.NoError(t, err)
	require.Equal(t, pgsched.AlreadyCompleted, res, "never re-run")
}

func TestRetrySemantics(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	var attempts sync.Map // ordering_id -> *atomic.Int32
	var lastRun sync.Map  // ordering_id -> []time.Time
	var mu sync.Mutex
	count := func(id string) *atomic.Int32 {
		v, _ := attempts.LoadOrStore(id, &atomic.Int32{})
		return v.(*atomic.Int32)
	}
	cfg := fastConfig(b.db.Schema)
	cfg.Handlers = map[string]pgsched.Handler{
		"flaky": pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error {
			if count(job.OrderingID).Add(1) < 3 {
				return errors.New("boom")
			}
			return nil
		}),
		"perm": pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error {
			count(job.OrderingID).Add(1)
			return pgsched.Permanent(errors.New("bad request"))
		}),
		"limited": pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error {
			count(job.OrderingID).Add(1)
			return errors.New("always")
		}),
		"after": pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error {
			mu.Lock()
			v, _ := lastRun.Load(job.OrderingID)
			runs, _ := v.([]time.Time)
			lastRun.Store(job.OrderingID, append(runs, time.Now()))
			mu.Unlock()
			if job.Attempt == 1 {
				return pgsched.RetryAfter(300*time.Millisecond, errors.New("later"))
			}
			return nil
		}),
		"next": pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error {
			count(job.OrderingID + "/next").Add(1)
			return nil
		}),
	}
	cfg.KindRetry = map[string]pgsched.RetryPolicy{"limited": {MaxAttempts: 3, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond}}
	startWorker(t, b.db, cfg)
	now := time.Now()
	_, err := b.client.ScheduleMany(context.Background(), []pgsched.Task{
		{OrderingID: "flaky", ScheduledAt: now, Kind: "flaky"},
		{OrderingID: "perm", ScheduledAt: now, Kind: "perm"},
		{OrderingID: "perm", ScheduledAt: now.Add(time.Millisecond), Kind: "next"},
		{OrderingID: "limited", ScheduledAt: now, Kind: "limited"},
		{OrderingID: "limited", ScheduledAt: now.Add(time.Millisecond), Kind: "next"},
		{OrderingID: "after", ScheduledAt: now, Kind: "after"},
		{OrderingID: "nohandler", ScheduledAt: now, Kind: "unknown-kind"},
	})
	require.NoError(t, err)

	eventually(t, 10*time.Second, func() bool {
		return count("flaky").Load() == 3 && count("limited/next").Load() == 1 && count("perm/next").Load() == 1
	}, "flaky retried to success; dead heads let their ordering_id move on")
	require.Equal(t, int32(1), count("perm").Load(), "permanent: dead at once")
	require.Equal(t, int32(3), count("limited").Load(), "max attempts then dead")

	eventually(t, 10*time.Second, func() bool {
		v, _ := lastRun.Load("after")
		runs, _ := v.([]time.Time)
		return len(runs) == 2
	}, "explicit retry delay")
	v, _ := lastRun.Load("after")
	runs := v.([]time.Time)
	require.GreaterOrEqual(t, runs[1].Sub(runs[0]), 250*time.Millisecond, "retry delay honoured")

	type dead struct {
		OrderingID string
		Attempt    int
		LastError  string
	}
	rows, err := b.db.Pool.Query(context.Background(), "SELECT ordering_id, attempt, last_error FROM "+b.db.Schema+".dead_tasks ORDER BY ordering_id")
	require.NoError(t, err)
	deads, err := pgx.CollectRows(rows, pgx.RowToStructByPos[dead])
	require.NoError(t, err)
	require.Len(t, deads, 2)
	require.Equal(t, "limited", deads[0].OrderingID)
	require.Equal(t, 3, deads[0].Attempt)
	require.Equal(t, "perm", deads[1].OrderingID)
	require.Contains(t, deads[1].LastError, "bad request")

	// An unknown kind is never dropped: it keeps retrying (the default policy).
	eventually(t, 10*time.Second, func() bool {
		var attempt int
		var lastErr *string
		err := b.db.Pool.QueryRow(context.Background(), "SELECT attempt, last_error FROM "+b.db.Schema+".tasks WHERE ordering_id = 'nohandler'").Scan(&attempt, &lastErr)
		return err == nil && attempt >= 2 && lastErr != nil
	}, "unknown kind retried")
}

func TestTransactionalHandler(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	_, err := b.db.Pool.Exec(ctx, "CREATE TABLE "+b.db.Schema+".effects (ordering_id text PRIMARY KEY)")
	require.NoError(t, err)
	var failOnce atomic.Bool
	failOnce.Store(true)
	cfg := fastConfig(b.db.Schema)
	cfg.TxHandlers = map[string]pgsched.TxHandler{"*": pgsched.TxHandlerFunc(func(ctx context.Context, tx pgx.Tx, job *pgsched.Job) error {
		if _, err := tx.Exec(ctx, "INSERT INTO "+b.db.Schema+".effects VALUES ($1)", job.OrderingID); err != nil {
			return err
		}
		if failOnce.CompareAndSwap(true, false) {
			return errors.New("fail after writing: must roll back")
		}
		return nil
	})}
	outcomes := watchOutcomes(&cfg)
	startWorker(t, b.db, cfg)
	_, err = b.client.Schedule(ctx, pgsched.Task{OrderingID: "tx", ScheduledAt: time.Now()})
	require.NoError(t, err)
	outcomes.completed(t, 1, 10*time.Second)
	require.Equal(t, 1, outcomes.count("retry"), "the first run failed and was retried")
	require.Equal(t, 1, countRows(t, b, "effects"), "the failed run's write rolled back, the retry's committed")
	require.Equal(t, 1, countRows(t, b, "completions"))
}

// TestChainsFlowWithoutPolling: with the poll fallback an hour away, the
// next task of an ordering_id still starts once its predecessor's outcome
// is written, whether the finisher wrote it (handing the successor over)
// or a transactional handler's own commit did (neither sends a NOTIFY),
// and a task due shortly after enqueue starts from the loop's own timer.
func TestChainsFlowWithoutPolling(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	var mu sync.Mutex
	ran := map[string][]string{}
	record := func(job *pgsched.Job) {
		mu.Lock()
		defer mu.Unlock()
		ran[job.OrderingID] = append(ran[job.OrderingID], job.UniquenessKey)
	}
	cfg := fastConfig(b.db.Schema)
	cfg.PollInterval = time.Hour
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	cfg.Handlers = map[string]pgsched.Handler{
		"plain": pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error { record(job); return nil }),
	}
	cfg.TxHandlers = map[string]pgsched.TxHandler{
		"tx": pgsched.TxHandlerFunc(func(ctx context.Context, tx pgx.Tx, job *pgsched.Job) error { record(job); return nil }),
	}
	outcomes := watchOutcomes(&cfg)
	startWorker(t, b.db, cfg)

	// One chain at a time, so no other outcome's signal carries it.
	want := map[string][]string{}
	for _, kind := range []string{"tx", "plain"} {
		now := time.Now()
		var tasks []pgsched.Task
		for i := range 15 {
			key := fmt.Sprintf("%02d", i)
			tasks = append(tasks, pgsched.Task{OrderingID: kind, Kind: kind, ScheduledAt: now.Add(time.Duration(i) * time.Millisecond), UniquenessKey: key})
			want[kind] = append(want[kind], key)
		}
		if kind == "plain" {
			// Due after the enqueue's NOTIFY has been and gone.
			tasks = append(tasks, pgsched.Task{OrderingID: "later", Kind: "plain", ScheduledAt: now.Add(300 * time.Millisecond)})
			want["later"] = []string{""}
		}
		_, err := b.client.ScheduleMany(ctx, tasks)
		require.NoError(t, err)
		outcomes.completed(t, len(want["tx"])+len(want["plain"])+len(want["later"]), 10*time.Second)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, want, ran, "each chain ran whole, in order")
	// The plain chain's first task was claimed; each later one is handed
	// over by its predecessor's finish (the transactional handlers record
	// their own completions and hand nothing over), unless the node's
	// short test lease lapsed under load at that moment: then the
	// next waits for a claim, so at most 14 and, in practice, all 14.
	// metric reads a counter or gauge; with kind, the completions of that
	// kind.
	metric := func(name, kind string) float64 {
		t.Helper()
		families, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if kind != "" && (labels["kind"] != kind || labels["result"] != "completed") {
					continue
				}
				if m.GetGauge() != nil {
					return m.GetGauge().GetValue()
				}
				return m.GetCounter().GetValue()
			}
		}
		return 0
	}
	handed := metric("pgsched_tasks_handed_over_total", "")
	require.Greater(t, handed, 0.0, "successors are handed over")
	require.LessOrEqual(t, handed, 14.0)

	// Each task is counted once, transactional ones too (their completion
	// used to be counted twice, and the running gauge went below zero).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		tx, plain, running := metric("pgsched_tasks_executed_total", "tx"), metric("pgsched_tasks_executed_total", "plain"),
			metric("pgsched_tasks_running", "")
		if tx == 15 && plain == 16 && running == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("completions counted: tx %v of 15, plain %v of 16; running gauge %v, not 0", tx, plain, running)
		}
	}
}

func TestStopIsSafe(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	w, err := pgsched.NewWorker(b.db.Pool, fastConfig(b.db.Schema))
	require.NoError(t, err)
	require.NoError(t, w.Stop(context.Background()), "stop without start")
	require.NoError(t, w.Stop(context.Background()), "twice")

	w = startWorker(t, b.db, fastConfig(b.db.Schema))
	require.True(t, w.Ready())
	require.NoError(t, w.Stop(context.Background()))
	require.NoError(t, w.Stop(context.Background()))
	require.False(t, w.Ready())
	require.Equal(t, 0, countRows(t, b, "nodes"), "deregistered")
}

func TestNewWorkerRejectsBadConfig(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	_, err := pgsched.NewWorker(b.db.Pool, pgsched.WorkerConfig{Schema: "Bad Schema"})
	require.ErrorContains(t, err, "invalid schema name")
	_, err = pgsched.NewWorker(b.db.Pool, pgsched.WorkerConfig{Concurrency: -1})
	require.ErrorContains(t, err, "Concurrency")
	_, err = pgsched.NewWorker(b.db.Pool, pgsched.WorkerConfig{Handlers: map[string]pgsched.Handler{"x": nil}})
	require.ErrorContains(t, err, `Handlers["x"] is nil`)
	_, err = pgsched.NewWorker(b.db.Pool, pgsched.WorkerConfig{Handlers: map[string]pgsched.Handler{"x": pgsched.HandlerFunc(nil)}})
	require.ErrorContains(t, err, `Handlers["x"] is nil`)
	noop := pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error { return nil })
	noopTx := pgsched.TxHandlerFunc(func(context.Context, pgx.Tx, *pgsched.Job) error { return nil })
	_, err = pgsched.NewWorker(b.db.Pool, pgsched.WorkerConfig{
		Handlers: map[string]pgsched.Handler{"x": noop}, TxHandlers: map[string]pgsched.TxHandler{"x": noopTx}})
	require.ErrorContains(t, err, `kind "x" is in both Handlers and TxHandlers`)
	_, err = pgsched.NewWorker(b.db.Pool, pgsched.WorkerConfig{KindRetry: map[string]pgsched.RetryPolicy{"x": {MaxAttempts: -1}}})
	require.ErrorContains(t, err, `KindRetry["x"].MaxAttempts must not be negative`)
}

// TestIsolation: one ordering_id whose handler always fails and one whose
// handler runs for 20 s block only themselves: every other ordering_id
// completes while the slow one is still running and the failing one keeps
// retrying.
func TestIsolation(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	slowDone := make(chan struct{})
	var failures atomic.Int32
	cfg := fastConfig(b.db.Schema)
	cfg.Concurrency = 10
	cfg.DrainTimeout = 100 * time.Millisecond
	cfg.Handlers = map[string]pgsched.Handler{
		"fail": pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error {
			failures.Add(1)
			return errors.New("always")
		}),
		"slow": pgsched.HandlerFunc(func(ctx context.Context, _ *pgsched.Job) error {
			defer close(slowDone)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Second):
				return nil
			}
		}),
		"*": pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error { return nil }),
	}
	startWorker(t, b.db, cfg)
	now := time.Now()
	var tasks []pgsched.Task
	for s := range 10 {
		at := now.Add(time.Duration(s) * time.Millisecond)
		tasks = append(tasks,
			pgsched.Task{OrderingID: "bad-fail", ScheduledAt: at, Kind: "fail"},
			pgsched.Task{OrderingID: "bad-slow", ScheduledAt: at, Kind: "slow"})
		for i := range 100 {
			tasks = append(tasks, pgsched.Task{OrderingID: fmt.Sprint("good-", i), ScheduledAt: at})
		}
	}
	_, err := b.client.ScheduleMany(context.Background(), tasks)
	require.NoError(t, err)
	eventually(t, 15*time.Second, func() bool {
		var left int
		require.NoError(t, b.db.Pool.QueryRow(context.Background(),
			"SELECT count(*) FROM "+b.db.Schema+".tasks WHERE ordering_id LIKE 'good-%'").Scan(&left))
		return left == 0
	}, "every other ordering_id completed")
	select {
	case <-slowDone:
		t.Fatal("the good ordering_ids waited for the slow one")
	default:
	}
	require.GreaterOrEqual(t, failures.Load(), int32(2), "the failing head keeps retrying")
	var badLeft int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		"SELECT count(*) FROM "+b.db.Schema+".tasks WHERE ordering_id LIKE 'bad-%'").Scan(&badLeft))
	require.Equal(t, 20, badLeft, "the bad ordering_ids hold their own tasks back, in order")
}

// TestClaimAheadStartsOnTime: tasks claimed ahead of their time are held
// and started no earlier than scheduled.
func TestClaimAheadStartsOnTime(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	var mu sync.Mutex
	early := map[string]time.Duration{}
	claimedEarly := 0
	cfg := fastConfig(b.db.Schema)
	cfg.ClaimAhead = pgtest.Patience(300 * time.Millisecond)
	cfg.Handlers = map[string]pgsched.Handler{"*": pgsched.HandlerFunc(func(_ context.Context, j *pgsched.Job) error {
		mu.Lock()
		early[j.OrderingID] = time.Until(j.ScheduledAt)
		if j.ScheduledAt.Sub(j.ClaimedAt) > 4*pgsched.DefaultClaimAhead {
			claimedEarly++
		}
		mu.Unlock()
		return nil
	})}
	startWorker(t, b.db, cfg)

	at := time.Now().Add(pgtest.Patience(600 * time.Millisecond))
	var tasks []pgsched.Task
	for i := range 20 {
		tasks = append(tasks, pgsched.Task{OrderingID: fmt.Sprint("ahead-", i), ScheduledAt: at.Add(time.Duration(i) * 10 * time.Millisecond)})
	}
	_, err := b.client.ScheduleMany(ctx, tasks)
	require.NoError(t, err)
	waitDrained(t, b, 10*time.Second)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, early, 20)
	// Claimed ahead by more than the default would: the setting is used.
	require.Positive(t, claimedEarly, "tasks were claimed well before they were due")
	for id, d := range early {
		// Microsecond storage of scheduled_at is the only slack.
		require.LessOrEqual(t, d, time.Millisecond, "%s started %s before its time", id, d)
	}
}

// TestPrefetch: a node holds up to Concurrency+Prefetch claimed tasks but
// never runs more than Concurrency handlers at once; on stop, the
// prefetched tasks that never started go back untouched (attempt 0) while
// the running ones drain.
func TestPrefetch(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	var now, peak, calls atomic.Int64
	release := make(chan struct{})
	cfg := fastConfig(b.db.Schema)
	cfg.Concurrency, cfg.Prefetch = 3, 5
	cfg.DrainTimeout = 10 * time.Second
	cfg.Handlers = map[string]pgsched.Handler{"*": pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error {
		calls.Add(1)
		n := now.Add(1)
		defer now.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		<-release
		return nil
	})}
	w, err := pgsched.NewWorker(b.db.Pool, cfg)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, w.Start(ctx))

	tasks := make([]pgsched.Task, 20)
	for i := range tasks {
		tasks[i] = pgsched.Task{OrderingID: fmt.Sprint("p", i), ScheduledAt: time.Now()}
	}
	_, err = b.client.ScheduleMany(ctx, tasks)
	require.NoError(t, err)
	running := func() int {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+b.db.Schema+".heads WHERE running").Scan(&n))
		return n
	}
	eventually(t, 10*time.Second, func() bool { return running() == 8 }, "3 running + 5 prefetched claimed")
	eventually(t, 10*time.Second, func() bool { return now.Load() == 3 }, "3 handlers busy")

	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop(ctx) }()
	// The prefetched five go back while the three running still drain.
	eventually(t, 10*time.Second, func() bool { return running() == 3 }, "prefetched tasks released during the drain")
	close(release)
	require.NoError(t, <-stopped)

	require.EqualValues(t, 3, peak.Load(), "never more handlers than Concurrency")
	require.EqualValues(t, 3, calls.Load(), "prefetched tasks never started")
	var pending, attempts int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*), coalesce(sum(attempt), 0) FROM "+b.db.Schema+".tasks WHERE state = 'pending'").Scan(&pending, &attempts))
	require.Equal(t, 17, pending, "three completed, the rest pending again")
	require.Zero(t, attempts, "a released task keeps its attempt count")
	require.Equal(t, 3, countRows(t, b, "completions"))
}

// TestCapacityAtMaximum: a worker with Concurrency and Prefetch at their
// maxima claims and runs a task, and a claim count beyond what an int4
// holds claims the due task rather than wrapping to a negative count that
// claims nothing.
func TestCapacityAtMaximum(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	_, err := b.client.Schedule(ctx, pgsched.Task{OrderingID: "wide-1", ScheduledAt: time.Now()})
	require.NoError(t, err)
	c, _ := claimTaskMax(t, b, "wide-1", math.MaxInt32+1)
	require.Equal(t, "wide-1", c.OrderingID)

	ran := make(chan string, 1)
	cfg := fastConfig(b.db.Schema)
	cfg.Concurrency, cfg.Prefetch = pgsched.MaxConcurrency, pgsched.MaxPrefetch
	cfg.Handlers = map[string]pgsched.Handler{"*": pgsched.HandlerFunc(func(_ context.Context, job *pgsched.Job) error {
		ran <- job.OrderingID
		return nil
	})}
	startWorker(t, b.db, cfg)
	_, err = b.client.Schedule(ctx, pgsched.Task{OrderingID: "wide-2", ScheduledAt: time.Now()})
	require.NoError(t, err)
	select {
	case id := <-ran:
		require.Equal(t, "wide-2", id)
	case <-time.After(20 * time.Second):
		t.Fatal("a worker at the maximum capacity ran nothing")
	}
}
