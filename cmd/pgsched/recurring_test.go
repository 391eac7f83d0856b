package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
)

// TestRecurring: recurring list shows the schedules; pause and resume
// switch one and say when it was so already; a name that is not there
// exits 3.
func TestRecurring(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.client.UpsertRecurring(ctx, pgsched.Recurring{Name: "nightly report", Spec: "30 2 * * *", TimeZone: "Europe/Paris",
		Kind: "report", Payload: json.RawMessage(`{"format":"pdf"}`)})
	require.NoError(t, err)

	out := b.ok(t, "recurring", "list")
	require.Regexp(t, `^NAME\s+SPEC\s+TIME_ZONE\s+KIND\s+MISSED\s+PAUSED\s+NEXT_RUN_AT\s+LAST_RUN_AT\s+LAST_RESULT\s+ERROR\n`, out)
	require.Contains(t, out, "nightly report")

	require.Equal(t, "paused recurring schedule nightly report\n", b.ok(t, "recurring", "pause", "nightly report"))
	var sw switched
	b.okJSON(t, &sw, "recurring", "pause", "nightly report")
	require.Equal(t, switched{Name: "nightly report", Paused: true, Changed: false}, sw)

	var list []recurringJSON
	b.okJSON(t, &list, "recurring", "list")
	require.Len(t, list, 1)
	require.True(t, list[0].Paused)
	require.Equal(t, "30 2 * * *", list[0].Spec)
	require.Equal(t, "Europe/Paris", list[0].TimeZone)
	require.JSONEq(t, `{"format":"pdf"}`, string(list[0].Payload))
	require.Nil(t, list[0].NextRunAt, "paused: no next tick")

	require.Equal(t, "resumed recurring schedule nightly report\n", b.ok(t, "recurring", "resume", "nightly report"))
	b.okJSON(t, &list, "recurring", "list")
	require.False(t, list[0].Paused)

	for _, verb := range []string{"pause", "resume"} {
		r := b.cli(t, "recurring", verb, "weekly")
		require.Equal(t, exitNotFound, r.code, verb)
		require.Equal(t, "pgsched: no recurring schedule is named weekly\n", r.stderr)
	}
}

// TestBinary: the built binary reads DATABASE_URL and PGSCHED_SCHEMA,
// prints JSON a script can read, and exits 0, 2 and 3 as documented.
func TestBinary(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bin := filepath.Join(t.TempDir(), "pgsched")
	build := exec.Command("go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	b.db.InsertTask(t, pgtest.TaskRow{OrderingID: "order-1", UniquenessKey: "u1", Kind: "mail", State: "pending"})

	pgsched := func(args ...string) (stdout, stderr string, code int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+b.db.URL, "PGSCHED_SCHEMA="+b.db.Schema)
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return o.String(), e.String(), exit.ExitCode()
		}
		require.NoError(t, err)
		return o.String(), e.String(), 0
	}

	stdout, stderr, code := pgsched("-json", "status")
	require.Equal(t, exitOK, code, stderr)
	var st status
	require.NoError(t, json.Unmarshal([]byte(stdout), &st))
	require.Equal(t, 8, st.Partitions.Total)

	stdout, stderr, code = pgsched("tasks", "show", "u1", "-json")
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, stdout, `"ordering_id": "order-1"`)

	_, stderr, code = pgsched("tasks", "show", "nope")
	require.Equal(t, exitNotFound, code)
	require.True(t, strings.HasPrefix(stderr, "pgsched: no pending, running or dead task"), stderr)

	_, stderr, code = pgsched("frobnicate")
	require.Equal(t, exitUsage, code)
	require.Equal(t, "pgsched: unknown command \"frobnicate\"\npgsched help lists the commands and flags\n", stderr)

	stdout, _, code = pgsched("version")
	require.Equal(t, exitOK, code)
	require.Regexp(t, `^pgsched \S+`, stdout)
}
