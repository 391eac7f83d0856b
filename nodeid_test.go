package pgsched_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
)

// TestOneProcessPerNodeID: a second worker process started with a node id
// that a live process holds waits, and says so in its log, instead of
// taking the id over: every task runs once, all in the first process. Once
// the first is SIGKILLed, the second takes the id when the dead process's
// lease runs out and runs what comes next.
func TestOneProcessPerNodeID(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	createExecLog(t, b.db)
	first := startChild(t, b.db, "dup", 5*time.Millisecond, 20, 5*time.Second, "CHILD_LOG_PID=1")
	second := spawnChild(t, b.db, "dup", 5*time.Millisecond, 20, 5*time.Second, "CHILD_LOG_PID=1")
	second.waitLog(t, "node id held by another process", 20*time.Second)

	scheduleGrid(t, b, 50, 20, 2*time.Second, "default")
	waitDrained(t, b, time.Minute)
	require.Zero(t, checkLog(t, b.db, 50, 20), "no task ran twice")
	ranIn := func() []string {
		rows, err := b.db.Pool.Query(context.Background(), "SELECT DISTINCT node FROM "+b.db.Schema+".execlog ORDER BY node")
		require.NoError(t, err)
		nodes, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return nodes
	}
	firstPID := fmt.Sprintf("dup#%d", first.cmd.Process.Pid)
	require.Equal(t, []string{firstPID}, ranIn(), "every task ran in the first process")
	select {
	case l := <-second.lines:
		t.Fatalf("the second process printed %q while the first held the node id", l)
	default:
	}

	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	second.waitLine(t, "STARTED", 20*time.Second)
	_, err := b.client.Schedule(context.Background(), pgsched.Task{OrderingID: "after", ScheduledAt: time.Now()})
	require.NoError(t, err)
	waitDrained(t, b, 30*time.Second)
	require.ElementsMatch(t, []string{firstPID, fmt.Sprintf("dup#%d", second.cmd.Process.Pid)}, ranIn(),
		"the second process took the id over once the first was gone")
}
