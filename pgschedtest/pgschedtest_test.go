package pgschedtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/pgschedtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func schemaExists(t *testing.T, schema string) bool {
	var ok bool
	require.NoError(t, pgtest.AdminPool(t).QueryRow(context.Background(),
		"SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)", schema).Scan(&ok))
	return ok
}

// TestSchemaIsThrowaway: each call gets its own migrated schema, gone
// once its test ends.
func TestSchemaIsThrowaway(t *testing.T) {
	t.Parallel()
	var a, b string
	t.Run("inner", func(t *testing.T) {
		a = pgschedtest.Schema(t, pgtest.AdminPool(t))
		b = pgschedtest.Schema(t, pgtest.AdminPool(t))
		require.NotEqual(t, a, b)
		require.True(t, schemaExists(t, a))
		c, err := pgsched.NewClient(pgtest.AdminPool(t), pgsched.ClientConfig{Schema: a})
		require.NoError(t, err)
		_, err = c.Schedule(context.Background(), pgsched.Task{OrderingID: "x", ScheduledAt: time.Now()})
		require.NoError(t, err, "the schema is migrated")
	})
	require.False(t, schemaExists(t, a))
	require.False(t, schemaExists(t, b))
}

// TestScheduledSeesTheTransaction: what a transaction scheduled shows in
// it before commit and nowhere else.
func TestScheduledSeesTheTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.AdminPool(t)
	schema := pgschedtest.Schema(t, pool)
	client, err := pgsched.NewClient(pool, pgsched.ClientConfig{Schema: schema})
	require.NoError(t, err)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	at := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	_, err = client.ScheduleTx(ctx, tx, pgsched.Task{OrderingID: "order-1", ScheduledAt: at, Kind: "invoice"})
	require.NoError(t, err)

	tasks := pgschedtest.RequireScheduled(t, client, tx, "invoice")
	require.Len(t, tasks, 1)
	require.Equal(t, "order-1", tasks[0].OrderingID)
	require.True(t, at.Equal(tasks[0].ScheduledAt))
	pgschedtest.RequireNotScheduled(t, client, tx, "other")

	other, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = other.Rollback(ctx) }()
	require.Empty(t, pgschedtest.Scheduled(t, client, other, "invoice"), "not committed: invisible elsewhere")
}

// TestWorkDue: due tasks run with the given handlers, in order per
// ordering_id, retries that fall due run too, future tasks do not, and
// WorkDue returns once nothing is due or running.
func TestWorkDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.AdminPool(t)
	schema := pgschedtest.Schema(t, pool)
	client, err := pgsched.NewClient(pool, pgsched.ClientConfig{Schema: schema})
	require.NoError(t, err)
	now := time.Now()
	_, err = client.ScheduleMany(ctx, []pgsched.Task{
		{OrderingID: "a", ScheduledAt: now.Add(-time.Second), Kind: "step"},
		{OrderingID: "a", ScheduledAt: now.Add(-time.Millisecond), Kind: "step"},
		{OrderingID: "b", ScheduledAt: now, Kind: "flaky"},
		{OrderingID: "c", ScheduledAt: now.Add(time.Hour), Kind: "step"},
	})
	require.NoError(t, err)

	failed := false
	runs := pgschedtest.WorkDue(ctx, t, pool, pgsched.WorkerConfig{
		Schema: schema,
		Handlers: map[string]pgsched.Handler{
			"step": pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error { return nil }),
			"flaky": pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error {
				if !failed {
					failed = true
					return pgsched.RetryAfter(0, errors.New("first try fails")) // due again at once
				}
				return nil
			}),
		},
	})
	var a []time.Time
	var b []error
	for _, r := range runs {
		switch r.Job.OrderingID {
		case "a":
			a = append(a, r.Job.ScheduledAt)
		case "b":
			b = append(b, r.Err)
		default:
			t.Fatalf("ran %s, which is not due", r.Job.OrderingID)
		}
	}
	require.Len(t, a, 2)
	require.True(t, a[0].Before(a[1]), "in order")
	require.Len(t, b, 2)
	require.ErrorContains(t, b[0], "first try fails")
	require.NoError(t, b[1])

	left, err := client.ListTasks(ctx, pgsched.TaskFilter{})
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.Equal(t, "c", left[0].OrderingID)
	require.Nil(t, pgschedtest.WorkDue(ctx, t, pool, pgsched.WorkerConfig{Schema: schema}), "nothing due: nothing runs")
}
