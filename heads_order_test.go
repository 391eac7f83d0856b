package pgsched_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedtype"
)

// TestSettleAfterEarlierEnqueue: a task enqueued before an ordering_id's head
// takes its place when the head is idle, and waits in the backlog until the
// head finishes when it runs.
func TestSettleAfterEarlierEnqueue(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	_, err := b.db.Pool.Exec(ctx, "UPDATE "+b.db.Schema+".settings SET grace = '1 hour'")
	require.NoError(t, err)
	t2 := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
	t1 := t2.Add(-time.Second)

	type row struct {
		at      time.Time
		id      int64
		running bool
		backlog bool
	}
	headOf := func(o string) row {
		t.Helper()
		var h row
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT scheduled_at, id, running, backlog FROM "+b.db.Schema+".heads WHERE ordering_id = $1", o).
			Scan(&h.at, &h.id, &h.running, &h.backlog))
		return h
	}
	backlogOf := func(o string) []time.Time {
		t.Helper()
		rows, err := b.db.Pool.Query(ctx, "SELECT scheduled_at FROM "+b.db.Schema+".backlog WHERE ordering_id = $1 ORDER BY scheduled_at", o)
		require.NoError(t, err)
		ats, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
		require.NoError(t, err)
		return ats
	}
	schedule := func(o string, at time.Time) {
		t.Helper()
		res, err := b.client.Schedule(ctx, pgsched.Task{OrderingID: o, ScheduledAt: at})
		require.NoError(t, err)
		require.Equal(t, pgsched.Inserted, res)
	}
	finish := func(c store.Claimed, epoch int64, outcome pgschedtype.Outcome) {
		t.Helper()
		res, err := b.store.Finish(ctx, b.db.Pool, "test-"+c.OrderingID, epoch, []store.Outcome{{
			Partition: c.Partition, OrderingID: c.OrderingID, ID: c.ID, ClaimedAt: c.ClaimedAt, Outcome: outcome,
		}}, store.Handover{})
		require.NoError(t, err)
		require.Equal(t, []int64{c.ID}, res.Applied)
	}
	noTasks := func(o string) {
		t.Helper()
		var n int
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+b.db.Schema+".tasks WHERE ordering_id = $1", o).Scan(&n))
		require.Zero(t, n)
	}

	t.Run("idle head", func(t *testing.T) {
		schedule("idle", t2)
		h := headOf("idle")
		require.True(t, h.at.Equal(t2))
		require.False(t, h.backlog, "no backlog yet")

		schedule("idle", t1)
		h = headOf("idle")
		require.True(t, h.at.Equal(t1), "the earlier task is the head")
		require.True(t, h.backlog)
		require.Len(t, backlogOf("idle"), 1)
		require.True(t, backlogOf("idle")[0].Equal(t2), "the old head waits in the backlog")

		c, epoch := claimTask(t, b, "idle")
		require.True(t, c.ScheduledAt.Equal(t1), "the earlier task runs first")
		finish(c, epoch, pgschedtype.OutcomeCompleted)
		h = headOf("idle")
		require.True(t, h.at.Equal(t2))
		require.False(t, h.running)
		require.False(t, h.backlog)
		require.Empty(t, backlogOf("idle"))

		c, epoch = claimTask(t, b, "idle")
		require.True(t, c.ScheduledAt.Equal(t2))
		finish(c, epoch, pgschedtype.OutcomeCompleted)
		noTasks("idle")
	})

	t.Run("running head", func(t *testing.T) {
		schedule("busy", t2)
		c2, epoch2 := claimTask(t, b, "busy")
		require.True(t, c2.ScheduledAt.Equal(t2))

		schedule("busy", t1)
		h := headOf("busy")
		require.True(t, h.at.Equal(t2), "a running head stays")
		require.True(t, h.running)
		require.True(t, h.backlog)
		require.Len(t, backlogOf("busy"), 1)
		require.True(t, backlogOf("busy")[0].Equal(t1), "the earlier task waits")

		finish(c2, epoch2, pgschedtype.OutcomeCompleted)
		h = headOf("busy")
		require.True(t, h.at.Equal(t1), "the earlier task is next")
		require.False(t, h.running)
		require.False(t, h.backlog)
		require.Empty(t, backlogOf("busy"))

		c1, epoch1 := claimTask(t, b, "busy")
		require.True(t, c1.ScheduledAt.Equal(t1))
		finish(c1, epoch1, pgschedtype.OutcomeCompleted)
		noTasks("busy")
	})

	// Given back (release or retry), the running head goes behind the
	// earlier task enqueued meanwhile.
	for _, outcome := range []pgschedtype.Outcome{pgschedtype.OutcomeRelease, pgschedtype.OutcomeRetry} {
		t.Run("running head "+string(outcome), func(t *testing.T) {
			o := "back-" + string(outcome)
			schedule(o, t2)
			c2, epoch2 := claimTask(t, b, o)
			schedule(o, t1)
			finish(c2, epoch2, outcome)
			h := headOf(o)
			require.True(t, h.at.Equal(t1), "the earlier task runs first")
			require.False(t, h.running)
			require.True(t, h.backlog)
			require.Len(t, backlogOf(o), 1)
			require.True(t, backlogOf(o)[0].Equal(t2))

			c1, epoch1 := claimTask(t, b, o)
			require.True(t, c1.ScheduledAt.Equal(t1))
			finish(c1, epoch1, pgschedtype.OutcomeCompleted)
			h = headOf(o)
			require.True(t, h.at.Equal(t2))
			require.False(t, h.backlog)
			c2, epoch2 = claimTask(t, b, o)
			require.True(t, c2.ScheduledAt.Equal(t2))
			if outcome == pgschedtype.OutcomeRelease {
				require.Equal(t, 1, c2.Attempt, "a released run does not count")
			} else {
				require.Equal(t, 2, c2.Attempt, "its second attempt")
			}
			finish(c2, epoch2, pgschedtype.OutcomeCompleted)
			noTasks(o)
		})
	}
}

// TestEnqueueOrderAcrossConnections: tasks of one ordering_id with the same
// scheduled_at run in enqueue order even when enqueued over different
// connections (each pooled connection caching its own block of task ids
// once put a later enqueue first).
func TestEnqueueOrderAcrossConnections(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	at := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	a, err := b.db.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer a.Release()
	c, err := b.db.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer c.Release()
	schedule := func(conn *pgxpool.Conn, o, uk string) {
		t.Helper()
		_, err := conn.Exec(ctx, "SELECT "+b.db.Schema+".schedule($1, $2, $3)", o, at, uk)
		require.NoError(t, err)
	}
	// Each connection takes ids once before the interleaved enqueues.
	schedule(a, "warm-a", "")
	schedule(c, "warm-c", "")
	for i := range 5 {
		conn := a
		if i%2 == 1 {
			conn = c
		}
		schedule(conn, "o", fmt.Sprintf("k%d", i))
	}
	rows, err := b.db.Pool.Query(ctx, "SELECT uniqueness_key FROM "+b.db.Schema+".tasks WHERE ordering_id = 'o' ORDER BY scheduled_at, id")
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"k0", "k1", "k2", "k3", "k4"}, got, "run order is enqueue order")
}
