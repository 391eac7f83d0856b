package pgsched_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedtype"
)

// TestReplayedOutcomeChangesNothing: an outcome statement whose response
// was lost after it committed is retried after the same node, in the same
// term, has claimed the task again. The replay applies to nothing: not a
// retry (which would make the running task pending again, to run twice),
// not a completion, not a release. Only the outcome of the current claim
// applies.
func TestReplayedOutcomeChangesNothing(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	const id = "replay-1"
	_, err := b.client.Schedule(ctx, pgsched.Task{OrderingID: id, ScheduledAt: time.Now()})
	require.NoError(t, err)
	c1, epoch := claimTask(t, b, id)
	node := "test-" + id
	part := []int32{int32(c1.Partition)}

	retry := []store.Outcome{{Partition: c1.Partition, OrderingID: id, ID: c1.ID, ClaimedAt: c1.ClaimedAt,
		Outcome: pgschedtype.OutcomeRetry, Error: "first try"}}
	res, err := b.store.Finish(ctx, b.db.Pool, node, epoch, retry, store.Handover{})
	require.NoError(t, err)
	require.Equal(t, []int64{c1.ID}, res.Applied, "the first try commits")

	again, err := b.store.Claim(ctx, b.db.Pool, node, epoch, part, 10, 0)
	require.NoError(t, err)
	require.Len(t, again, 1)
	c2 := again[0]
	require.Equal(t, c1.ID, c2.ID)
	require.Equal(t, 2, c2.Attempt)
	require.True(t, c2.ClaimedAt.After(c1.ClaimedAt), "each claim has its own time")

	for _, outcome := range []pgschedtype.Outcome{pgschedtype.OutcomeRetry, pgschedtype.OutcomeCompleted, pgschedtype.OutcomeDead, pgschedtype.OutcomeRelease} {
		replay := retry
		replay[0].Outcome = outcome
		res, err = b.store.Finish(ctx, b.db.Pool, node, epoch, replay, store.Handover{})
		require.NoError(t, err)
		require.Empty(t, res.Applied, "a replayed %s of the first claim applies to nothing", outcome)

		var running bool
		var attempt int
		var claimedAt time.Time
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT running, attempt, claimed_at FROM "+b.db.Schema+".heads WHERE ordering_id = $1", id).
			Scan(&running, &attempt, &claimedAt))
		require.True(t, running, "still running under the second claim after a replayed %s", outcome)
		require.Equal(t, 2, attempt)
		require.True(t, claimedAt.Equal(c2.ClaimedAt))
		require.Equal(t, 0, countRows(t, b, "completions"))
		require.Equal(t, 0, countRows(t, b, "dead_tasks"))
	}

	res, err = b.store.Finish(ctx, b.db.Pool, node, epoch, []store.Outcome{{Partition: c2.Partition, OrderingID: id, ID: c2.ID,
		ClaimedAt: c2.ClaimedAt, Outcome: pgschedtype.OutcomeCompleted}}, store.Handover{})
	require.NoError(t, err)
	require.Equal(t, []int64{c2.ID}, res.Applied, "the current claim's outcome applies")
	require.Equal(t, 1, countRows(t, b, "completions"))
	require.Equal(t, 0, countRows(t, b, "tasks"))
}
