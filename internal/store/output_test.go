package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedtype"
)

// TestFinishKeepsOutputOnlyWithItsCompletion: an output rides with its
// completion: a fenced outcome (a stale epoch, or a claim that is not the
// task's current one) stores neither, a retry stores no output, and the
// applied completion's output is read back by key. Also on Citus, where a
// batch with outputs commits through the coordinator.
func TestFinishKeepsOutputOnlyWithItsCompletion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	st, err := store.Open(ctx, db.Pool, db.Schema)
	require.NoError(t, err)
	at := time.Now().Truncate(time.Microsecond)
	running := func(o string) store.Outcome {
		id := db.InsertTask(t, pgtest.TaskRow{OrderingID: o, ScheduledAt: at, UniquenessKey: "u", State: "running", NodeID: "n1", Epoch: 1})
		var part int
		var claimed time.Time
		require.NoError(t, db.Pool.QueryRow(ctx, "SELECT partition_id, claimed_at FROM "+db.Schema+".heads WHERE id = $1", id).Scan(&part, &claimed))
		return store.Outcome{Partition: part, OrderingID: o, ID: id, ClaimedAt: claimed, Outcome: pgschedtype.OutcomeCompleted}
	}
	output := func(o string) []byte {
		out, err := st.TaskOutput(ctx, db.Pool, o, at, "u")
		require.NoError(t, err)
		return out
	}

	done, stale, old, retried := running("done"), running("stale"), running("old"), running("retried")
	withOutput := func(o *store.Outcome, json string) {
		o.Output = &store.Output{JSON: []byte(json), ScheduledAt: at, UniquenessKey: "u"}
	}
	withOutput(&done, `{"n":1}`)
	withOutput(&stale, `{"n":2}`)
	withOutput(&old, `{"n":3}`)
	withOutput(&retried, `{"n":4}`)
	old.ClaimedAt = old.ClaimedAt.Add(-time.Second)
	retried.Outcome, retried.RetryIn = pgschedtype.OutcomeRetry, time.Hour

	f, err := st.Finish(ctx, db.Pool, "n1", 2, []store.Outcome{stale}, store.Handover{})
	require.NoError(t, err)
	require.Empty(t, f.Applied, "another epoch's outcome is fenced")
	f, err = st.Finish(ctx, db.Pool, "n1", 1, []store.Outcome{done, old, retried}, store.Handover{})
	require.NoError(t, err)
	require.ElementsMatch(t, []int64{done.ID, retried.ID}, f.Applied, "an outcome for an older claim is fenced")

	require.JSONEq(t, `{"n":1}`, string(output("done")))
	for _, o := range []string{"stale", "old", "retried"} {
		require.Nil(t, output(o), "%s: no completion, no output", o)
	}
}
