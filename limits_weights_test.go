package pgsched_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
)

// TestGroupWeightsShareTurns: weighted fair share. A limited kind with 30
// due tasks in each of groups a (weight 3), b and c (weight 1): each
// round of the groups gives a three turns and b and c one, so of the
// first 25 starts a has about 15 and b and c about 5 each (without the
// weight, about 8 each; with a's turns never ending, a all 25). Once with room for one task at a time, where
// a's turns carry over from claim to claim, and once with room for 5,
// where one claim serves several turns.
func TestGroupWeightsShareTurns(t *testing.T) {
	t.Parallel()
	for _, room := range []int{1, 5} {
		t.Run(fmt.Sprint("max running ", room), func(t *testing.T) {
			t.Parallel()
			b := setupClient(t)
			ctx := context.Background()
			_, err := b.client.SetLimit(ctx, "export", pgsched.Limit{MaxRunning: room})
			require.NoError(t, err)
			was, err := b.client.SetGroupWeight(ctx, "export", "a", 3)
			require.NoError(t, err)
			require.Equal(t, 1, was)
			var tasks []pgsched.Task
			now := time.Now()
			for i := range 30 {
				for _, g := range []string{"a", "b", "c"} {
					tasks = append(tasks, pgsched.Task{OrderingID: fmt.Sprint(g, "-", i), ScheduledAt: now, Kind: "export", GroupKey: g})
				}
			}
			_, err = b.client.ScheduleMany(ctx, tasks)
			require.NoError(t, err)

			order := groupsInStartOrder(t, b, "export", 10)
			require.Len(t, order, 90)
			// Five rounds of a, a, a, b, c: the first 25 starts.
			n := map[string]int{}
			for _, g := range order[:25] {
				n[g]++
			}
			t.Logf("first 25 starts: a %d, b %d, c %d; order %s", n["a"], n["b"], n["c"], strings.Join(order[:25], ""))
			require.InDelta(t, 15, n["a"], 3, "a's share of the first 25 at weight 3")
			require.InDelta(t, 5, n["b"], 2, "b's share of the first 25")
			require.InDelta(t, 5, n["c"], 2, "c's share of the first 25")
			// And in rounds, not in runs of a group: a claim's room too
			// goes to the groups in turn.
			clear(n)
			for _, g := range order[:10] {
				n[g]++
			}
			require.True(t, n["a"] >= 5 && n["a"] <= 8 && n["b"] >= 1 && n["c"] >= 1,
				"the first 10 starts are two rounds: a 6, b 2, c 2, give or take; got %v", n)
		})
	}
}

// TestGroupWeightBadInputSameFromGoAndSQL: every bad weight is refused,
// with the same reason from the Go client (before any round trip) and
// from pgsched.set_group_weight, and nothing is written; a good one is
// listed, says the weight it replaced, and weight 1 removes it.
func TestGroupWeightBadInputSameFromGoAndSQL(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	for _, c := range []struct {
		kind, group string
		weight      int
	}{
		{"", "g", 2},
		{strings.Repeat("k", 256), "g", 2},
		{"k\tx", "g", 2},
		{"k", "g\nx", 2},
		{"k", strings.Repeat("g", 256), 2},
		{"k", "g", 0},
		{"k", "g", -3},
		{"k", "g", 1001},
	} {
		_, goErr := b.client.SetGroupWeight(ctx, c.kind, c.group, c.weight)
		require.ErrorIs(t, goErr, pgsched.ErrInvalidTask, "%+v", c)
		_, sqlErr := b.db.Pool.Exec(ctx, "SELECT "+b.db.Schema+".set_group_weight($1, $2, $3)", c.kind, c.group, c.weight)
		require.Error(t, sqlErr, "%+v", c)
		reason := goErr.Error()[strings.LastIndex(goErr.Error(), ": ")+2:]
		require.Contains(t, sqlErr.Error(), reason, "the same words from SQL as from Go")
	}
	ws, err := b.client.GroupWeights(ctx)
	require.NoError(t, err)
	require.Empty(t, ws, "nothing written")

	was, err := b.client.SetGroupWeight(ctx, "k", "", 4)
	require.NoError(t, err)
	require.Equal(t, 1, was)
	was, err = b.client.SetGroupWeight(ctx, "k", "", 7)
	require.NoError(t, err)
	require.Equal(t, 4, was)
	ws, err = b.client.GroupWeights(ctx)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.Equal(t, pgsched.GroupWeight{Kind: "k", GroupKey: "", Weight: 7, Limited: false, UpdatedAt: ws[0].UpdatedAt}, ws[0])
	was, err = b.client.SetGroupWeight(ctx, "k", "", 1)
	require.NoError(t, err)
	require.Equal(t, 7, was)
	ws, err = b.client.GroupWeights(ctx)
	require.NoError(t, err)
	require.Empty(t, ws, "weight 1 is the default and removes the row")
}
