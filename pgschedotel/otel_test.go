package pgschedotel_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/pgschedotel"
	"github.com/pgsched/pgsched/pgschedtype"
)

// A task enqueued inside a span runs in a span of the same trace: the
// child of, and linked to, the enqueueing span, with the task's kind,
// ordering_id, attempt and outcome; the handler's context carries it. The
// trace context is stored with the task on its way, through the backlog
// and hand-overs (three tasks of one ordering_id), and a dead task keeps
// it, for its retry to link to as well.
func TestRunSpanJoinsTheEnqueueingTrace(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	tr := newTraced(t)
	ctx := context.Background()
	client, err := pgsched.NewClient(db.Pool, pgsched.ClientConfig{Schema: db.Schema, Tracer: tr.tracer})
	require.NoError(t, err)

	handlerSpans := make(chan trace.SpanContext, 10)
	var fail atomic.Bool
	fail.Store(true)
	startWorker(t, db.Pool, workerConfig(db.Schema, tr.tracer, map[string]pgsched.Handler{
		"work": pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error {
			handlerSpans <- trace.SpanContextFromContext(ctx)
			return nil
		}),
		"doomed": pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error {
			if fail.Load() {
				return pgsched.Permanent(errors.New("no such account"))
			}
			return nil
		}),
	}))

	pctx, parent := tr.tp.Tracer("test").Start(ctx, "enqueue")
	at := time.Now()
	_, err = client.ScheduleMany(pctx, []pgsched.Task{
		{OrderingID: "acct-1", ScheduledAt: at, UniquenessKey: "a", Kind: "work"},
		{OrderingID: "acct-1", ScheduledAt: at.Add(time.Millisecond), UniquenessKey: "b", Kind: "work"},
		{OrderingID: "acct-1", ScheduledAt: at.Add(2 * time.Millisecond), UniquenessKey: "c", Kind: "work"},
	})
	require.NoError(t, err)
	parent.End()
	want := parent.SpanContext()

	for i := 1; i <= 3; i++ {
		run := tr.waitSpan(t, "pgsched.run work", pgtest.Patience(10*time.Second))
		require.Equal(t, want.TraceID(), run.SpanContext().TraceID(), "run %d is in the enqueueing trace", i)
		require.Equal(t, want.SpanID(), run.Parent().SpanID(), "run %d is the enqueueing span's child", i)
		require.True(t, run.Parent().IsRemote())
		require.Len(t, run.Links(), 1)
		require.Equal(t, want.SpanID(), run.Links()[0].SpanContext.SpanID(), "run %d links to the enqueueing span", i)
		require.Equal(t, trace.SpanKindConsumer, run.SpanKind())
		a := attrs(run)
		require.Equal(t, "work", a["pgsched.kind"])
		require.Equal(t, "acct-1", a["pgsched.ordering_id"])
		require.Equal(t, int64(1), a["pgsched.attempt"])
		require.Equal(t, "completed", a["pgsched.outcome"])
		require.NotZero(t, a["pgsched.task_id"])
		select {
		case sc := <-handlerSpans:
			// The run span ends after its handler, so each handler's span
			// is one of those runs'; the first three are the three runs.
			require.Equal(t, want.TraceID(), sc.TraceID(), "the handler's context carries the run span")
			require.NotEqual(t, want.SpanID(), sc.SpanID())
		default:
			t.Fatal("the run span ended before its handler ran")
		}
	}

	// A dead task keeps its trace context; retried, it runs in the same
	// trace again.
	dctx, dspan := tr.tp.Tracer("test").Start(ctx, "enqueue doomed")
	_, err = client.Schedule(dctx, pgsched.Task{OrderingID: "acct-2", ScheduledAt: time.Now(), Kind: "doomed"})
	require.NoError(t, err)
	dspan.End()
	run := tr.waitSpan(t, "pgsched.run doomed", pgtest.Patience(10*time.Second))
	require.Equal(t, "dead", attrs(run)["pgsched.outcome"])
	require.Equal(t, codes.Error, run.Status().Code)
	require.Contains(t, run.Status().Description, "no such account")
	var id int64
	var stored string
	for {
		// The outcome is written by a finish batch after the run's span.
		tr.waitSpan(t, "pgsched.finish", pgtest.Patience(10*time.Second))
		err := db.Pool.QueryRow(ctx, fmt.Sprintf("SELECT id, traceparent FROM %s.dead_tasks WHERE ordering_id = 'acct-2'",
			db.Schema)).Scan(&id, &stored)
		if !errors.Is(err, pgx.ErrNoRows) {
			require.NoError(t, err)
			break
		}
	}
	require.Equal(t, tr.tracer.Inject(dctx), stored)
	fail.Store(false)
	n, err := client.RetryDead(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	run = tr.waitSpan(t, "pgsched.run doomed", pgtest.Patience(10*time.Second))
	require.Equal(t, dspan.SpanContext().TraceID(), run.SpanContext().TraceID(), "the retry runs in the dead task's trace")
	require.Equal(t, "completed", attrs(run)["pgsched.outcome"])
}

// WithNewTrace: each run is the root of a trace of its own, linked to the
// enqueueing span.
func TestWithNewTraceLinksOnly(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	tr := newTraced(t, pgschedotel.WithNewTrace())
	client, err := pgsched.NewClient(db.Pool, pgsched.ClientConfig{Schema: db.Schema, Tracer: tr.tracer})
	require.NoError(t, err)
	startWorker(t, db.Pool, workerConfig(db.Schema, tr.tracer, map[string]pgsched.Handler{
		"*": pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error { return nil }),
	}))
	pctx, parent := tr.tp.Tracer("test").Start(context.Background(), "enqueue")
	_, err = client.Schedule(pctx, pgsched.Task{OrderingID: "o", ScheduledAt: time.Now()})
	require.NoError(t, err)
	parent.End()
	run := tr.waitSpan(t, "pgsched.run default", pgtest.Patience(10*time.Second))
	require.NotEqual(t, parent.SpanContext().TraceID(), run.SpanContext().TraceID())
	require.False(t, run.Parent().IsValid(), "a root span")
	require.Len(t, run.Links(), 1)
	require.Equal(t, parent.SpanContext().TraceID(), run.Links()[0].SpanContext.TraceID())
}

// The SQL API's traceparent arguments (schedule's and schedule_many's) are
// what a Go client's Tracer stores: the run joins that trace. A NULL or
// empty traceparent stores nothing, and the run starts a trace of its own.
func TestSQLTraceparentIsPickedUp(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	tr := newTraced(t)
	ctx := context.Background()
	one := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	many := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	s := db.Schema
	_, err := db.Pool.Exec(ctx, fmt.Sprintf(`SELECT %s.schedule('one', now(), kind => 'sql', traceparent => $1)`, s), one)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, fmt.Sprintf(`SELECT %s.schedule_many(ARRAY['many', 'none'], ARRAY[now(), now()],
		kinds => ARRAY['sql', 'sql'], traceparents => ARRAY[$1, ''])`, s), many)
	require.NoError(t, err)
	var stored []*string
	require.NoError(t, db.Pool.QueryRow(ctx, fmt.Sprintf(
		`SELECT array_agg(traceparent ORDER BY ordering_id) FROM %s.heads`, s)).Scan(&stored))
	require.Equal(t, []*string{&many, nil, &one}, stored, "many, none, one")

	startWorker(t, db.Pool, workerConfig(s, tr.tracer, map[string]pgsched.Handler{
		"*": pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error { return nil }),
	}))
	got := map[string]sdktrace.ReadOnlySpan{}
	for len(got) < 3 {
		run := tr.waitSpan(t, "pgsched.run sql", pgtest.Patience(10*time.Second))
		got[attrs(run)["pgsched.ordering_id"].(string)] = run
	}
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", got["one"].SpanContext().TraceID().String())
	require.Equal(t, "00f067aa0ba902b7", got["one"].Parent().SpanID().String())
	require.Equal(t, "0af7651916cd43dd8448eb211c80319c", got["many"].SpanContext().TraceID().String())
	require.False(t, got["none"].Parent().IsValid(), "no traceparent: a root span")
	require.Empty(t, got["none"].Links())
}

// A traceparent that is not a W3C trace context is refused like any bad
// field: PGS01 naming it, nothing stored, the same words from the SQL API
// and from a Go client whose Tracer gave it.
func TestBadTraceparentIsRefused(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	ctx := context.Background()
	const words = "traceparent is not a W3C trace context"
	for _, bad := range []string{
		"nonsense",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",  // uppercase
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // zero trace id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  // zero span id
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // another version
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-", // too long
	} {
		_, err := db.Pool.Exec(ctx, fmt.Sprintf(`SELECT %s.schedule('o', now(), traceparent => $1)`, db.Schema), bad)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, bad)
		require.Equal(t, "PGS01", pgErr.Code, bad)
		require.Contains(t, pgErr.Message, words, bad)
		_, err = db.Pool.Exec(ctx, fmt.Sprintf(`SELECT %s.schedule_many(ARRAY['a', 'b'], ARRAY[now(), now()], traceparents => ARRAY[NULL, $1])`,
			db.Schema), bad)
		require.ErrorContains(t, err, words+": want 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>, lowercase, ids not all zero (batch item 2)", bad)

		client, err := pgsched.NewClient(db.Pool, pgsched.ClientConfig{Schema: db.Schema, Tracer: badInject{bad}})
		require.NoError(t, err)
		_, err = client.Schedule(ctx, pgsched.Task{OrderingID: "o", ScheduledAt: time.Now()})
		require.ErrorIs(t, err, pgsched.ErrInvalidTask, bad)
		require.ErrorContains(t, err, words+": want 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>, lowercase, ids not all zero", bad)
	}
	_, err := db.Pool.Exec(ctx, fmt.Sprintf(`SELECT %s.schedule_many(ARRAY['a', 'b'], ARRAY[now(), now()], traceparents => ARRAY['']::text[])`,
		db.Schema))
	require.ErrorContains(t, err, "arrays must all have 2 elements")
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s.tasks", db.Schema)).Scan(&n))
	require.Zero(t, n, "nothing stored")
}

// badInject is a Tracer whose Inject gives s.
type badInject struct{ s string }

func (b badInject) Inject(context.Context) string { return b.s }
func (badInject) StartRun(ctx context.Context, _ *pgsched.Job) (context.Context, func(pgschedtype.Outcome, string)) {
	return ctx, func(pgschedtype.Outcome, string) {}
}
func (badInject) StartBatch(context.Context, string) func(int, error) { return func(int, error) {} }

// Claims and outcome batches get spans of their own, with their size.
func TestClaimAndFinishSpans(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	tr := newTraced(t)
	client, err := pgsched.NewClient(db.Pool, pgsched.ClientConfig{Schema: db.Schema})
	require.NoError(t, err)
	tasks := make([]pgsched.Task, 20)
	for i := range tasks {
		tasks[i] = pgsched.Task{OrderingID: fmt.Sprint("o", i), ScheduledAt: time.Now()}
	}
	_, err = client.ScheduleMany(context.Background(), tasks)
	require.NoError(t, err)
	startWorker(t, db.Pool, workerConfig(db.Schema, tr.tracer, map[string]pgsched.Handler{
		"*": pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error { return nil }),
	}))
	claimed, finished := 0, 0
	deadline := time.After(pgtest.Patience(10 * time.Second))
	for claimed < len(tasks) || finished < len(tasks) {
		select {
		case s := <-tr.ended:
			switch s.Name() {
			case "pgsched.claim":
				require.Equal(t, trace.SpanKindClient, s.SpanKind())
				claimed += int(attrs(s)["pgsched.batch_size"].(int64))
			case "pgsched.finish":
				require.Equal(t, codes.Unset, s.Status().Code)
				finished += int(attrs(s)["pgsched.batch_size"].(int64))
			case "pgsched.run default":
				require.False(t, s.Parent().IsValid(), "enqueued without a Tracer: a trace of its own")
			}
		case <-deadline:
			t.Fatalf("within the deadline, claim spans covered %d tasks and finish spans %d, of %d", claimed, finished, len(tasks))
		}
	}
	require.Equal(t, len(tasks), claimed)
	require.Equal(t, len(tasks), finished)
}
