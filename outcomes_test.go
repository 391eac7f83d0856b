package pgsched_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgarray"
	"github.com/pgsched/pgsched/internal/webhook"
)

// lastError reads the stored error of an ordering_id's pending head.
func lastError(t *testing.T, b clientBundle, orderingID string) (string, bool) {
	t.Helper()
	var msg *string
	var running bool
	err := b.db.Pool.QueryRow(context.Background(),
		"SELECT last_error, running FROM "+b.db.Schema+".heads WHERE ordering_id = $1", orderingID).Scan(&msg, &running)
	if err != nil || msg == nil || running {
		return "", false
	}
	return *msg, true
}

// scheduleNow schedules one task per ordering_id, due now, of the kind
// kindOf gives.
func scheduleNow(t *testing.T, b clientBundle, ids []string, kindOf func(string) string) {
	t.Helper()
	var tasks []pgsched.Task
	for _, id := range ids {
		tasks = append(tasks, pgsched.Task{OrderingID: id, ScheduledAt: time.Now(), Kind: kindOf(id)})
	}
	_, err := b.client.ScheduleMany(context.Background(), tasks)
	require.NoError(t, err)
}

// TestUnstorableErrorTextIsCleaned: a Go handler's error and a webhook
// target's response body holding NUL bytes and invalid UTF-8, which
// PostgreSQL text cannot hold, share outcome batches with successful
// tasks. The successful tasks complete, and the failing ones are retried
// with the text made storable.
func TestUnstorableErrorTextIsCleaned(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("oops\x00boom\xff"))
	}))
	t.Cleanup(srv.Close)
	routes, err := webhook.ParseRoutes("hook=" + srv.URL)
	require.NoError(t, err)
	exec, err := webhook.New(webhook.Config{Routes: routes, BeforeSend: pgsched.CheckFence})
	require.NoError(t, err)

	slow := pgsched.RetryPolicy{MinBackoff: time.Hour}
	cfg := fastConfig(b.db.Schema)
	cfg.FinishDelay = 20 * time.Millisecond // outcomes gather into shared batches
	cfg.Handlers = map[string]pgsched.Handler{
		"ok":  pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error { return nil }),
		"bad": pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error { return errors.New("bad \xff oops\x00boom") }),
		"hook": pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error {
			return exec.Deliver(ctx, webhook.Task{OrderingID: job.OrderingID, ScheduledAt: job.ScheduledAt, Kind: job.Kind, Payload: job.Payload, Attempt: job.Attempt})
		}),
	}
	cfg.KindRetry = map[string]pgsched.RetryPolicy{"bad": slow, "hook": slow}
	var ids []string
	for i := range 40 {
		ids = append(ids, fmt.Sprintf("ok-%02d", i))
	}
	ids = append(ids, "bad-1", "hook-1")
	scheduleNow(t, b, ids, func(id string) string { return strings.SplitN(id, "-", 2)[0] })
	outcomes := watchOutcomes(&cfg)
	startWorker(t, b.db, cfg)

	outcomes.waitFor(t, 20*time.Second, func(l *outcomeLog) bool {
		return l.count("completed") == 40 && l.has("bad-1", "retry") && l.has("hook-1", "retry")
	}, "successful tasks completed, failing ones waiting to retry")
	msg, _ := lastError(t, b, "bad-1")
	require.Equal(t, "bad \uFFFD oops\uFFFDboom", msg)
	msg, _ = lastError(t, b, "hook-1")
	require.Contains(t, msg, "status 500")
	require.Contains(t, msg, "oops\uFFFDboom")
	require.NotContains(t, msg, "\x00")
}

// TestRefusedOutcomeIsSetAside: PostgreSQL refuses one outcome of a batch
// for what it holds. The batch is split until that outcome stands alone,
// so the others are written; an outcome refused for its error text is
// written without it, and one refused whatever it holds is set aside and
// tried again later, holding up nothing. While it stays refused for
// longer than the lease TTL the node reports not ready; once the database
// takes it, the node is ready again. Every handler returns at once, when
// all have started, so the outcomes come together, and the worker's
// finish statements are traced: the refused outcomes were first sent in a
// statement with good ones, which the database refused.
func TestRefusedOutcomeIsSetAside(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	// Stand-ins for whatever a database may refuse: a constraint on the
	// error text, and one on the dead task itself.
	_, err := b.db.Pool.Exec(ctx, "ALTER TABLE "+b.db.Schema+".heads ADD CONSTRAINT no_poison CHECK (last_error NOT LIKE '%poison%')")
	require.NoError(t, err)
	_, err = b.db.Pool.Exec(ctx, "ALTER TABLE "+b.db.Schema+".dead_tasks ADD CONSTRAINT not_stuck CHECK (ordering_id <> 'stuck-1')")
	require.NoError(t, err)

	var ids []string
	for i := range 40 {
		ids = append(ids, fmt.Sprintf("ok-%02d", i))
	}
	ids = append(ids, "poison-1", "stuck-1")
	var started atomic.Int32
	all := make(chan struct{})
	together := func(ctx context.Context) error {
		if started.Add(1) == int32(len(ids)) {
			close(all)
		}
		select {
		case <-all:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	cfg := fastConfig(b.db.Schema)
	cfg.Concurrency = len(ids)
	cfg.FinishDelay = 20 * time.Millisecond
	cfg.Handlers = map[string]pgsched.Handler{
		"ok": pgsched.HandlerFunc(func(ctx context.Context, _ *pgsched.Job) error { return together(ctx) }),
		"poison": pgsched.HandlerFunc(func(ctx context.Context, _ *pgsched.Job) error {
			return errors.Join(together(ctx), errors.New("poison"))
		}),
		"stuck": pgsched.HandlerFunc(func(ctx context.Context, _ *pgsched.Job) error {
			return pgsched.Permanent(errors.Join(together(ctx), errors.New("give up")))
		}),
	}
	cfg.KindRetry = map[string]pgsched.RetryPolicy{"poison": {MinBackoff: time.Hour}}
	scheduleNow(t, b, ids, func(id string) string { return strings.SplitN(id, "-", 2)[0] })
	outcomes := watchOutcomes(&cfg)
	finishes := &finishTrace{}
	w := startWorkerOn(t, tracedPool(t, b.db.URL, finishes), cfg)

	outcomes.waitFor(t, 20*time.Second, func(l *outcomeLog) bool {
		return l.count("completed") == 40 && l.has("poison-1", "retry")
	}, "the others are written while one outcome is refused")
	msg, _ := lastError(t, b, "poison-1")
	require.Equal(t, "pgsched: this outcome's error text could not be stored (SQLSTATE 23514)", msg)
	for _, id := range []string{"poison-1", "stuck-1"} {
		first, ok := finishes.first(id)
		require.True(t, ok, "a finish statement carried %s", id)
		require.Greater(t, len(first.ids), 1, "%s's outcome first went in a batch with others: %v", id, first.ids)
		require.ErrorContains(t, first.err, "violates check constraint", "and the database refused that statement")
	}

	eventually(t, 10*time.Second, func() bool { return w.Readiness() != nil }, "not ready once the refusal outlasts the TTL")
	require.ErrorContains(t, w.Readiness(), "outcomes of 1 tasks unrecorded")
	require.ErrorContains(t, w.Readiness(), "not_stuck")
	require.Equal(t, 0, countRows(t, b, "dead_tasks"))

	_, err = b.db.Pool.Exec(ctx, "ALTER TABLE "+b.db.Schema+".dead_tasks DROP CONSTRAINT not_stuck")
	require.NoError(t, err)
	outcomes.waitFor(t, 15*time.Second, func(l *outcomeLog) bool { return l.has("stuck-1", "dead") }, "the set-aside outcome is written once the database takes it")
	require.Equal(t, 1, countRows(t, b, "dead_tasks"))
	eventually(t, 5*time.Second, func() bool { return w.Readiness() == nil }, "ready again")
}

// finishTrace records the finish statements (pgsched.finish_tasks) run on
// a pool it traces: the ordering_ids of the outcomes each carried, and its
// error.
type finishTrace struct {
	mu    sync.Mutex
	calls []finishCall
}

type finishCall struct {
	ids []string
	err error
}

type finishKey struct{}

func (f *finishTrace) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !strings.Contains(d.SQL, "-- name: TaskFinish") {
		return ctx
	}
	for _, a := range d.Args {
		// The first text array: the outcomes' ordering_ids, as the store
		// sends it (internal/pgarray).
		if ids, ok := a.(pgarray.Text); ok {
			return context.WithValue(ctx, finishKey{}, []string(ids))
		}
	}
	return ctx
}

func (f *finishTrace) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if ids, ok := ctx.Value(finishKey{}).([]string); ok {
		f.mu.Lock()
		f.calls = append(f.calls, finishCall{ids: ids, err: d.Err})
		f.mu.Unlock()
	}
}

// first returns the first finish statement that carried an outcome of id.
func (f *finishTrace) first(id string) (finishCall, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.calls {
		if slices.Contains(c.ids, id) {
			return c, true
		}
	}
	return finishCall{}, false
}

// tracedPool opens a pool on url whose statements tracer sees, closed when
// the test ends (after the worker on it stops).
func tracedPool(t *testing.T, url string, tracer pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 10
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}
