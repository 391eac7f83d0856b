package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/pgtest"
)

// TestTasksList: tasks list shows pending and running tasks in a table
// and whole in JSON, filtered by kind, state and ordering_id (an
// ordering_id's in the order they run), at most -limit; an empty list is
// a header, or [].
func TestTasksList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	at := time.Date(2031, 1, 2, 3, 4, 5, 123456000, time.UTC)
	head := b.db.InsertTask(t, pgtest.TaskRow{OrderingID: "order-1", ScheduledAt: at, UniquenessKey: "a", Kind: "mail", State: "pending", Payload: `{"to":"x@example.com"}`})
	b.db.InsertTask(t, pgtest.TaskRow{OrderingID: "order-1", ScheduledAt: at.Add(time.Minute), UniquenessKey: "b", Kind: "mail", State: "backlog"})
	b.db.InsertTask(t, pgtest.TaskRow{OrderingID: "order-2", ScheduledAt: at, Kind: "sms", State: "running", NodeID: "node-7", Attempt: 2, LastError: "timeout\nupstream"})

	out := b.ok(t, "tasks", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	require.Regexp(t, `^ID\s+STATE\s+ORDERING_ID\s+SCHEDULED_AT\s+UNIQUENESS_KEY\s+KIND\s+RUN_AT\s+ATTEMPT\s+NODE\s+LAST_ERROR$`, lines[0])
	require.Contains(t, out, "2031-01-02T03:04:05.123456Z")
	require.Regexp(t, `order-2\s+2031-01-02T03:04:05.123456Z\s+""\s+sms\s+\S+\s+2\s+node-7\s+timeout upstream`, out,
		"an empty key shows as \"\", a message on one line")

	var tasks []task
	b.okJSON(t, &tasks, "tasks", "list", "-ordering-id", "order-1")
	require.Len(t, tasks, 2)
	require.Equal(t, head, tasks[0].ID)
	require.Equal(t, "a", tasks[0].UniquenessKey, "in run order")
	require.Equal(t, "b", tasks[1].UniquenessKey)
	require.Equal(t, "pending", tasks[0].State)
	require.True(t, at.Equal(tasks[0].ScheduledAt))
	require.JSONEq(t, `{"to":"x@example.com"}`, string(tasks[0].Payload))

	b.okJSON(t, &tasks, "tasks", "list", "-state", "running")
	require.Len(t, tasks, 1)
	require.Equal(t, "node-7", tasks[0].NodeID)
	require.Equal(t, "timeout\nupstream", tasks[0].LastError, "JSON gives the message whole")
	require.Equal(t, 2, tasks[0].Attempt)

	b.okJSON(t, &tasks, "-json", "tasks", "list", "-kind", "mail", "-limit", "1")
	require.Len(t, tasks, 1)
	require.Equal(t, "mail", tasks[0].Kind)

	b.okJSON(t, &tasks, "tasks", "list", "-kind", "none")
	require.Empty(t, tasks)
	require.Equal(t, "[]\n", b.ok(t, "tasks", "list", "-kind", "none", "-json"))
	require.Regexp(t, `^ID\s+STATE`, b.ok(t, "tasks", "list", "-kind", "none"))
}

// TestTasksShow: tasks show finds a task by id or uniqueness key, pending,
// running or dead, and shows it whole; a key that matches several shows
// each; one that matches none exits 3.
func TestTasksShow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	at := time.Now().Add(time.Hour).UTC()
	pending := b.db.InsertTask(t, pgtest.TaskRow{OrderingID: "order-1", ScheduledAt: at, UniquenessKey: "invoice-7", Kind: "mail", State: "pending", Payload: `{"n":1}`})
	dead := b.db.InsertTask(t, pgtest.TaskRow{OrderingID: "order-2", ScheduledAt: at, UniquenessKey: "invoice-7", Kind: "mail", State: "dead", Attempt: 5, LastError: "gave up"})
	b.db.InsertTask(t, pgtest.TaskRow{OrderingID: "order-3", ScheduledAt: at, UniquenessKey: "other", State: "pending"})

	out := b.ok(t, "tasks", "show", "invoice-7")
	require.Equal(t, 2, strings.Count(out, "uniqueness_key  invoice-7"), out)
	require.Regexp(t, `state\s+pending\nid\s+`+fmt.Sprint(pending), out)
	require.Regexp(t, `state\s+dead\nid\s+`+fmt.Sprint(dead), out)
	require.Regexp(t, `died_at\s+\d{4}-`, out)
	require.Regexp(t, `last_error\s+gave up`, out)
	require.Regexp(t, `payload\s+\{"n": 1\}`, out)

	var tasks []task
	b.okJSON(t, &tasks, "tasks", "show", "invoice-7", "-ordering-id", "order-2")
	require.Len(t, tasks, 1, "-ordering-id narrows")
	require.Equal(t, dead, tasks[0].ID)
	require.Equal(t, "dead", tasks[0].State)
	require.NotNil(t, tasks[0].DiedAt)
	require.Nil(t, tasks[0].RunAt)
	require.Equal(t, 5, tasks[0].Attempt)

	b.okJSON(t, &tasks, "tasks", "show", fmt.Sprint(pending))
	require.Len(t, tasks, 1, "by id")
	require.Equal(t, "order-1", tasks[0].OrderingID)
	require.True(t, at.Truncate(time.Microsecond).Equal(*tasks[0].RunAt))

	for _, args := range [][]string{{"tasks", "show", "nope"}, {"tasks", "show", "invoice-7", "-ordering-id", "order-3"}, {"tasks", "show", "999999", "-json"}} {
		r := b.cli(t, args...)
		require.Equal(t, exitNotFound, r.code, "%q: %s", args, r.stderr)
		require.Contains(t, r.stderr, "pgsched: no pending, running or dead task has the id or uniqueness key")
		require.Empty(t, r.stdout)
	}
}

// TestTasksOutput: tasks output prints a completed task's recorded output
// by key, as JSON; exit 3 when it has none or no completion is known, 2
// for a time that is not RFC 3339.
func TestTasksOutput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	at := time.Date(2026, 11, 26, 9, 0, 0, 250000000, time.UTC)
	b.db.InsertTask(t, pgtest.TaskRow{OrderingID: "invoice-7", ScheduledAt: at, UniquenessKey: "v2", Kind: "bill", State: "completed"})
	b.db.InsertTask(t, pgtest.TaskRow{OrderingID: "plain", ScheduledAt: at, Kind: "bill", State: "completed"})
	_, err := b.db.Pool.Exec(t.Context(), "UPDATE "+b.db.Schema+`.completions SET output = '{"total": 12.5}' WHERE ordering_id = 'invoice-7'`)
	require.NoError(t, err)

	out := b.ok(t, "tasks", "output", "-scheduled-at", "2026-11-26T10:00:00.25+01:00", "-uniqueness-key", "v2", "invoice-7")
	require.JSONEq(t, `{"total": 12.5}`, out)
	for _, args := range [][]string{
		{"tasks", "output", "-scheduled-at", at.Format(time.RFC3339Nano), "plain"},
		{"tasks", "output", "-scheduled-at", at.Format(time.RFC3339Nano), "invoice-7"},
		{"tasks", "output", "-scheduled-at", at.Format(time.RFC3339Nano), "nobody"},
	} {
		r := b.cli(t, args...)
		require.Equal(t, exitNotFound, r.code, "%q: %s", args, r.stderr)
		require.Contains(t, r.stderr, "no output")
	}
	r := b.cli(t, "tasks", "output", "-scheduled-at", "yesterday", "invoice-7")
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "-scheduled-at must be an RFC 3339 time")
}
