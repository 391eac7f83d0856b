package pgsched_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/migrator"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/pgschedmigrate"
	"github.com/pgsched/pgsched/pgschedui"
)

// runLog records handler runs in memory: the database is what fails over.
type runLog struct {
	mu   sync.Mutex
	runs []handlerRun
}

type handlerRun struct {
	worker     string
	start, end time.Time
}

func (l *runLog) add(r handlerRun) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs = append(l.runs, r)
	return len(l.runs) - 1
}

func (l *runLog) finish(i int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs[i].end = time.Now()
}

func (l *runLog) snapshot() []handlerRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]handlerRun(nil), l.runs...)
}

// TestAsyncFailoverKeepsFencing: an asynchronous standby that missed the
// primary's last commits is promoted while a node that cannot reach it
// still runs a task whose claim the standby never saw, under a lease the
// standby thinks ran out long ago. The other node, which reaches the new
// primary at once, must not run that task until the first node's own
// clock has ended its term: no ordering_id runs on two nodes at once.
//
// The first node connects to the old primary only, as a node cut off from
// the new one would: it keeps its handler running until its local lease
// deadline, as fencing promises. The second names both servers.
func TestAsyncFailoverKeepsFencing(t *testing.T) {
	t.Parallel()
	if pgtest.Citus() {
		t.Skip("runs on servers of its own, the same with or without Citus; the single-server suite runs it")
	}
	ctx := context.Background()
	rep := pgtest.NewReplicated(t, false)
	schema := "failover"
	require.NoError(t, migrator.Up(ctx, rep.Primary.URL(), migrator.Options{Schema: schema}))

	const ttl = 6 * time.Second
	var log runLog
	handler := func(name string) pgsched.Handler {
		return pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error {
			i := log.add(handlerRun{worker: name, start: time.Now()})
			defer log.finish(i)
			if name == "cut-off" {
				<-ctx.Done() // in flight until its term ends
				return ctx.Err()
			}
			return nil
		})
	}
	start := func(name, url string) *pgsched.Worker {
		pool, err := pgxpool.New(ctx, url)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		cfg := fastConfig(schema)
		cfg.NodeID, cfg.LeaseTTL = name, ttl
		cfg.Handlers = map[string]pgsched.Handler{"*": handler(name)}
		return startWorkerOn(t, pool, cfg)
	}

	cutOff := start("cut-off", rep.Primary.URL())
	client, err := pgsched.NewClient(mustPool(t, rep.Primary.URL()), pgsched.ClientConfig{Schema: schema})
	require.NoError(t, err)
	_, err = client.Schedule(ctx, pgsched.Task{OrderingID: "x", ScheduledAt: time.Now().Add(time.Second)})
	require.NoError(t, err)
	standby := mustPool(t, rep.Standby.URL())
	eventually(t, 10*time.Second, func() bool {
		var n int
		_ = standby.QueryRow(ctx, "SELECT count(*) FROM "+schema+".tasks WHERE ordering_id = 'x'").Scan(&n)
		return n == 1
	}, "the enqueue reaches the standby")
	rep.CutReplication(t)
	eventually(t, 10*time.Second, func() bool { return len(log.snapshot()) == 1 }, "the cut-off node runs x")
	require.True(t, cutOff.Ready())

	// The standby now thinks the cut-off node's lease ran out; on the
	// primary the node keeps renewing it.
	eventually(t, 2*ttl, func() bool {
		var expired bool
		_ = standby.QueryRow(ctx, "SELECT lease_expires_at < now() FROM "+schema+".nodes WHERE node_id = 'cut-off'").Scan(&expired)
		return expired
	}, "the standby sees the lease expired")
	other := start("other", rep.URL())

	rep.Failover(t)
	promoted := time.Now()
	eventually(t, ttl+10*time.Second, func() bool {
		return len(log.snapshot()) >= 2 && !log.snapshot()[1].end.IsZero()
	}, "x runs again, on the new primary")
	runs := log.snapshot()
	require.Equal(t, "cut-off", runs[0].worker)
	require.Equal(t, "other", runs[1].worker)
	require.False(t, runs[0].end.IsZero() || runs[1].start.Before(runs[0].end),
		"x ran on two nodes at once: the second run started at %s, the first ended at %s (zero: still running)",
		runs[1].start.Format(time.StampMilli), runs[0].end.Format(time.StampMilli))
	require.Less(t, time.Since(promoted), ttl+10*time.Second)
	require.True(t, other.Ready(), "the other node is ready on the new primary")
}

// TestSyncFailoverLosesNothing: with a synchronous standby, a worker on
// the multi-host connection string finds the promoted standby by itself:
// every task enqueued before the failover runs, in order, and the worker
// is ready again within a lease TTL plus a few seconds of the promotion
// (it waits one TTL on the new primary, then registers).
func TestSyncFailoverLosesNothing(t *testing.T) {
	t.Parallel()
	if pgtest.Citus() {
		t.Skip("runs on servers of its own, the same with or without Citus; the single-server suite runs it")
	}
	ctx := context.Background()
	rep := pgtest.NewReplicated(t, true)
	schema := "failover"
	require.NoError(t, migrator.Up(ctx, rep.URL(), migrator.Options{Schema: schema}))
	pool := mustPool(t, rep.URL())
	client, err := pgsched.NewClient(pool, pgsched.ClientConfig{Schema: schema})
	require.NoError(t, err)

	const ttl = 2 * time.Second
	var mu sync.Mutex
	ran := map[string][]string{}
	cfg := fastConfig(schema)
	cfg.LeaseTTL = ttl
	cfg.Handlers = map[string]pgsched.Handler{"*": pgsched.HandlerFunc(func(_ context.Context, job *pgsched.Job) error {
		mu.Lock()
		defer mu.Unlock()
		ran[job.OrderingID] = append(ran[job.OrderingID], job.UniquenessKey)
		return nil
	})}
	w := startWorkerOn(t, pool, cfg)

	var tasks []pgsched.Task
	at := time.Now().Add(500 * time.Millisecond)
	for i := range 300 {
		tasks = append(tasks, pgsched.Task{OrderingID: fmt.Sprint("o", i%10), ScheduledAt: at.Add(time.Duration(i) * 10 * time.Millisecond),
			UniquenessKey: fmt.Sprintf("%04d", i)})
	}
	_, err = client.ScheduleMany(ctx, tasks)
	require.NoError(t, err)
	eventually(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, r := range ran {
			n += len(r)
		}
		return n > 50
	}, "work under way")
	rep.Failover(t)
	promoted := time.Now()
	eventually(t, ttl+10*time.Second, w.Ready, "the worker is ready on the new primary")
	require.Less(t, time.Since(promoted), ttl+10*time.Second)

	// Enqueue on the new primary too, after o0's last task: the client
	// found it.
	_, err = client.Schedule(ctx, pgsched.Task{OrderingID: "o0", ScheduledAt: at.Add(4 * time.Second), UniquenessKey: "9999"})
	require.NoError(t, err)
	eventually(t, 30*time.Second, func() bool {
		var left int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".tasks").Scan(&left); err != nil {
			return false
		}
		return left == 0
	}, "every task done")
	var done int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".completions").Scan(&done))
	require.Equal(t, 301, done, "nothing lost")
	mu.Lock()
	defer mu.Unlock()
	for id, keys := range ran {
		seen := map[string]bool{}
		last := ""
		for _, k := range keys {
			if seen[k] {
				continue // a run whose outcome died with the old primary runs again
			}
			require.Greater(t, k, last, "%s ran in order", id)
			seen[k], last = true, k
		}
	}
}

func mustPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// TestMultiHostFindsThePrimary: with the standby named first in a
// multi-host connection string, the migrator, the client, a worker and
// the console all work on the primary.
func TestMultiHostFindsThePrimary(t *testing.T) {
	t.Parallel()
	if pgtest.Citus() {
		t.Skip("runs on servers of its own, the same with or without Citus; the single-server suite runs it")
	}
	ctx := context.Background()
	rep := pgtest.NewReplicated(t, false)
	url := rep.StandbyFirstURL()
	const schema = "multihost"
	require.NoError(t, migrator.Up(ctx, url, migrator.Options{Schema: schema}))
	pool := mustPool(t, url)
	require.NoError(t, pgschedmigrate.Up(ctx, pool, pgschedmigrate.Config{Schema: schema}))
	client, err := pgsched.NewClient(pool, pgsched.ClientConfig{Schema: schema})
	require.NoError(t, err)
	ran := make(chan string, 1)
	cfg := fastConfig(schema)
	cfg.Handlers = map[string]pgsched.Handler{"*": pgsched.HandlerFunc(func(_ context.Context, job *pgsched.Job) error {
		ran <- job.OrderingID
		return nil
	})}
	startWorkerOn(t, pool, cfg)
	res, err := client.Schedule(ctx, pgsched.Task{OrderingID: "multi", ScheduledAt: time.Now()})
	require.NoError(t, err)
	require.Equal(t, pgsched.Inserted, res)
	select {
	case id := <-ran:
		require.Equal(t, "multi", id)
	case <-time.After(pgtest.Patience(20 * time.Second)):
		t.Fatal("the task did not run")
	}

	ui, err := pgschedui.New(pool, pgschedui.Config{Schema: schema})
	require.NoError(t, err)
	for _, page := range []string{"/ui/", "/ui/cluster", "/ui/tasks?ordering_id=multi"} {
		rec := httptest.NewRecorder()
		ui.ServeHTTP(rec, httptest.NewRequest("GET", page, nil))
		require.Equal(t, 200, rec.Code, "%s: %s", page, rec.Body.String())
	}
}
