package pgsched_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
)

// TestFrozenNodeStartsNothingStale: a node is frozen (SIGSTOP) past its
// TTL while its four handlers wait on the database and four more tasks are
// claimed ahead of their time. The database answers during the freeze, so
// on the thaw the handlers return before any timer has fired and the
// handler pool would go straight on to the tasks claimed ahead. None of
// them starts on the thawed node: its backup runs every task, and the
// thawed node's only runs on record are the four that started before the
// freeze. The handlers wait on an advisory lock the test holds until the
// node is frozen, so the order of events does not depend on timing.
func TestFrozenNodeStartsNothingStale(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	createExecLog(t, b.db)
	nodes := []string{"st-a", "st-b"}
	kids := map[string]*child{}
	for _, n := range nodes {
		kids[n] = startChild(t, b.db, n, 0, 4, time.Second, "CHILD_CLAIM_AHEAD=1s")
	}
	rows := waitSettled(t, b.db, nodes)
	a, _ := row(rows, "st-a")
	var ids []string
	for i := 0; len(ids) < 8; i++ {
		id := fmt.Sprintf("id-%04d", i)
		if slices.Contains(a.Partitions, int32(pgsched.Partition(id, 8))) {
			ids = append(ids, id)
		}
	}
	gate, err := b.db.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer gate.Release()
	lock := rand.Int64N(1<<62) + 1
	_, err = gate.Exec(ctx, "SELECT pg_advisory_lock($1)", lock)
	require.NoError(t, err)
	locked := true
	unlock := func() {
		_, err := gate.Exec(ctx, "SELECT pg_advisory_unlock($1)", lock)
		require.NoError(t, err)
		locked = false
	}
	defer func() {
		if locked {
			_, _ = gate.Exec(ctx, "SELECT pg_advisory_unlock($1)", lock)
		}
	}()
	var busy, ahead []pgsched.Task
	for _, id := range ids[:4] {
		busy = append(busy, pgsched.Task{OrderingID: id, ScheduledAt: time.Now(), Kind: "probe", Payload: fmt.Appendf(nil, `{"lock": %d}`, lock)})
	}
	_, err = b.client.ScheduleMany(ctx, busy)
	require.NoError(t, err)
	eventually(t, 5*time.Second, func() bool { return countRows(t, b, "execlog") == len(busy) }, "st-a runs the first four")
	at := time.Now().Add(1500 * time.Millisecond)
	for _, id := range ids[4:] {
		ahead = append(ahead, pgsched.Task{OrderingID: id, ScheduledAt: at, Kind: "probe"})
	}
	_, err = b.client.ScheduleMany(ctx, ahead)
	require.NoError(t, err)
	// Claimed a second ahead of their time; with every handler waiting on
	// the lock, none of them can start whenever they fall due.
	eventually(t, 10*time.Second, func() bool {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(ctx,
			"SELECT count(*) FROM "+b.db.Schema+".tasks WHERE node_id = 'st-a' AND claimed_at < run_at").Scan(&n))
		return n == len(ahead)
	}, "st-a claims the other four ahead of their time")
	require.NoError(t, kids["st-a"].cmd.Process.Signal(syscall.SIGSTOP))
	frozen := time.Now()
	thawed := false
	defer func() {
		if !thawed {
			_ = kids["st-a"].cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	waitStopped(t, kids["st-a"])
	unlock() // the database answers the four handlers while st-a is frozen

	eventually(t, 4*childTTL+4*time.Second, func() bool { return countRows(t, b, "completions") == len(ids) }, "st-b stands in and runs all eight")
	r, _ := row(clusterRows(t, b.db), "st-a")
	require.False(t, r.Live && r.Epoch == a.Epoch, "frozen past its lease: the term it froze in is over")
	require.NoError(t, kids["st-a"].cmd.Process.Signal(syscall.SIGCONT))
	thawed = true

	eventually(t, 20*time.Second, func() bool {
		r, ok := row(clusterRows(t, b.db), "st-a")
		return ok && r.Live && r.Epoch > a.Epoch
	}, "st-a re-registers under a new epoch")
	// Stop it so that anything it would still start has started, then look.
	require.NoError(t, kids["st-a"].cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, kids["st-a"].cmd.Wait())

	type run struct {
		OrderingID, Node string
		Started          time.Time
	}
	logRows, err := b.db.Pool.Query(ctx, "SELECT ordering_id, node, started FROM "+b.db.Schema+".execlog ORDER BY started")
	require.NoError(t, err)
	runs, err := pgx.CollectRows(logRows, pgx.RowToStructByPos[run])
	require.NoError(t, err)
	var byA []string
	byB := map[string]int{}
	for _, r := range runs {
		if r.Node == "st-a" {
			require.True(t, r.Started.Before(frozen), "st-a started %s at %s, after it was frozen at %s", r.OrderingID, r.Started, frozen)
			byA = append(byA, r.OrderingID)
			continue
		}
		byB[r.OrderingID]++
	}
	require.ElementsMatch(t, ids[:4], byA, "the thawed node started nothing it held under its dead term")
	require.Len(t, byB, len(ids), "the backup ran every task")
	for id, n := range byB {
		require.Equal(t, 1, n, "the backup ran %s once", id)
	}
}

// waitStopped waits until c's process is stopped (SIGSTOP delivered), as
// /proc says.
func waitStopped(t *testing.T, c *child) {
	t.Helper()
	stat := fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid)
	eventually(t, 5*time.Second, func() bool {
		b, err := os.ReadFile(stat)
		require.NoError(t, err)
		// pid (comm) state ...: comm may hold spaces, so read after the last ')'.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		return len(f) > 0 && f[0] == "T"
	}, "%s stopped", c.node)
}
