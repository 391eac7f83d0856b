package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/pgtest"
)

// deadRows inserts dead tasks: two of kind mail (order-1, order-2), one of
// sms (order-3), and returns their ids in that order.
func deadRows(t *testing.T, b bundle) []int64 {
	t.Helper()
	at := time.Now().UTC()
	return []int64{
		b.db.InsertTask(t, pgtest.TaskRow{OrderingID: "order-1", ScheduledAt: at, UniquenessKey: "u1", Kind: "mail", State: "dead", Attempt: 3, LastError: "550 no such user"}),
		b.db.InsertTask(t, pgtest.TaskRow{OrderingID: "order-2", ScheduledAt: at, UniquenessKey: "u2", Kind: "mail", State: "dead", Attempt: 3, LastError: "bounced"}),
		b.db.InsertTask(t, pgtest.TaskRow{OrderingID: "order-3", ScheduledAt: at, Kind: "sms", State: "dead", Payload: `{"to":"+1"}`}),
	}
}

func (b bundle) deadIDs(t *testing.T, args ...string) []int64 {
	t.Helper()
	var tasks []task
	b.okJSON(t, &tasks, append([]string{"dead", "list"}, args...)...)
	ids := make([]int64, len(tasks))
	for i, k := range tasks {
		require.Equal(t, "dead", k.State)
		ids[i] = k.ID
	}
	return ids
}

// TestDeadListShow: dead list shows dead tasks newest first, filtered by
// kind, ordering_id and time of death; dead show shows one whole, and
// exits 3 for an id that is not dead.
func TestDeadListShow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := deadRows(t, b)

	out := b.ok(t, "dead", "list")
	require.Regexp(t, `^ID\s+DIED_AT\s+KIND\s+ORDERING_ID\s+SCHEDULED_AT\s+UNIQUENESS_KEY\s+ATTEMPT\s+NODE\s+LAST_ERROR\n`, out)
	require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 4)
	require.Regexp(t, `mail\s+order-1\s+\S+\s+u1\s+3\s+n1\s+550 no such user`, out)

	require.Equal(t, []int64{ids[2], ids[1], ids[0]}, b.deadIDs(t), "newest first (same time: highest id first)")
	require.Equal(t, []int64{ids[1], ids[0]}, b.deadIDs(t, "-kind", "mail"))
	require.Equal(t, []int64{ids[1]}, b.deadIDs(t, "-ordering-id", "order-2"))
	require.Equal(t, []int64{ids[2]}, b.deadIDs(t, "-limit", "1"))
	require.Empty(t, b.deadIDs(t, "-died-before", "1h"))
	require.Len(t, b.deadIDs(t, "-died-after", "1h"), 3)
	require.Len(t, b.deadIDs(t, "-died-after", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)), 3)

	out = b.ok(t, "dead", "show", fmt.Sprint(ids[2]))
	require.Regexp(t, `state\s+dead\n`, out)
	require.Regexp(t, `payload\s+\{"to": "\+1"\}`, out)
	var one task
	b.okJSON(t, &one, "dead", "show", fmt.Sprint(ids[0]))
	require.Equal(t, "550 no such user", one.LastError)
	require.Equal(t, "order-1", one.OrderingID)

	r := b.cli(t, "dead", "show", "999999")
	require.Equal(t, exitNotFound, r.code)
	require.Equal(t, "pgsched: no dead task has the id 999999\n", r.stderr)
}

// TestDeadRetryDelete: dead retry puts dead tasks back in line (pending
// again, attempt 0) by id, by filter or all; dead delete removes them;
// an id that is not dead exits 3 after acting on the others.
func TestDeadRetryDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := deadRows(t, b)

	require.Equal(t, "retried 1 dead task\n", b.ok(t, "dead", "retry", fmt.Sprint(ids[0])))
	var tasks []task
	b.okJSON(t, &tasks, "tasks", "list", "-ordering-id", "order-1")
	require.Len(t, tasks, 1, "back in line")
	require.Equal(t, "pending", tasks[0].State)
	require.Equal(t, "u1", tasks[0].UniquenessKey)
	require.Zero(t, tasks[0].Attempt)
	require.Equal(t, []int64{ids[2], ids[1]}, b.deadIDs(t))

	r := b.cli(t, "dead", "retry", fmt.Sprint(ids[0]), fmt.Sprint(ids[1]), "-json")
	require.Equal(t, exitNotFound, r.code, "ids[0] is not dead any more")
	require.JSONEq(t, fmt.Sprintf(`{"retried":1,"missing":["%d"]}`, ids[0]), r.stdout)
	require.Equal(t, fmt.Sprintf("pgsched: no dead task has the id %d\n", ids[0]), r.stderr)
	require.Equal(t, []int64{ids[2]}, b.deadIDs(t))

	// By filter, and all.
	b.db.InsertTask(t, pgtest.TaskRow{OrderingID: "order-4", Kind: "push", State: "dead"})
	b.db.InsertTask(t, pgtest.TaskRow{OrderingID: "order-5", Kind: "push", State: "dead"})
	require.Equal(t, "retried 0 dead tasks\n", b.ok(t, "dead", "retry", "-kind", "none"))
	require.Equal(t, "deleted 2 dead tasks\n", b.ok(t, "dead", "delete", "-kind", "push"))
	require.Equal(t, []int64{ids[2]}, b.deadIDs(t))
	var n map[string]int
	b.okJSON(t, &n, "dead", "delete", "-all")
	require.Equal(t, map[string]int{"deleted": 1}, n)
	require.Empty(t, b.deadIDs(t))

	r = b.cli(t, "dead", "delete", "12345")
	require.Equal(t, exitNotFound, r.code)
	require.Equal(t, "deleted 0 dead tasks\n", r.stdout)

	// What was retried runs like any task: it is a new task with the dead
	// one's key, kind and payload.
	var kind string
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		"SELECT kind FROM "+b.db.Schema+".tasks WHERE ordering_id = 'order-2'").Scan(&kind))
	require.Equal(t, "mail", kind)
}
