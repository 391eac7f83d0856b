package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
)

// ran records the tasks a worker ran, by ordering_id.
type ran struct {
	mu  sync.Mutex
	ids map[string]int
}

func (r *ran) count(orderingID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ids[orderingID]
}

// startWorker runs a worker on b's schema that runs every kind, and stops
// it with the test.
func startWorker(t *testing.T, b bundle, nodeID string) *ran {
	t.Helper()
	r := &ran{ids: map[string]int{}}
	w, err := pgsched.NewWorker(b.db.Pool, pgsched.WorkerConfig{
		Schema: b.db.Schema, NodeID: nodeID,
		LeaseTTL: pgtest.Patience(time.Second), PollInterval: 200 * time.Millisecond,
		MaintenanceInterval: 100 * time.Millisecond, ClusterInterval: 100 * time.Millisecond,
		CountInterval: 100 * time.Millisecond, DrainTimeout: 2 * time.Second,
		Handlers: map[string]pgsched.Handler{"*": pgsched.HandlerFunc(func(_ context.Context, job *pgsched.Job) error {
			r.mu.Lock()
			r.ids[job.OrderingID]++
			r.mu.Unlock()
			return nil
		})},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	return r
}

// TestPauseResumeWithWorker: with a worker running, kinds pause stops it
// from starting the kind's tasks while other kinds run, and status shows
// the node leading and serving every partition, the kind paused and its
// task's lag (which the cluster's lag leaves out); kinds resume runs the
// task.
func TestPauseResumeWithWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	runs := startWorker(t, b, "cli-node")

	require.Equal(t, "paused kind slow\n", b.ok(t, "kinds", "pause", "slow"))
	require.Equal(t, "kind slow was paused already\n", b.ok(t, "kinds", "pause", "slow"))
	_, err := b.client.ScheduleMany(ctx, []pgsched.Task{
		{OrderingID: "held", ScheduledAt: time.Now(), Kind: "slow"},
		{OrderingID: "flows", ScheduledAt: time.Now(), Kind: "fast"},
	})
	require.NoError(t, err)
	eventually(t, 10*time.Second, func() bool { return runs.count("flows") == 1 }, "the other kind runs")

	var st status
	eventually(t, 10*time.Second, func() bool {
		b.okJSON(t, &st, "status")
		return st.Leader == "cli-node" && st.Partitions.ByOwner == 8 && st.CountedAt != nil && len(st.Kinds) == 1 &&
			st.Kinds[0].Pending != nil && *st.Kinds[0].Pending == 1
	}, "status shows the leader, its partitions and the paused kind counted (the other has no task left)")
	require.Len(t, st.Nodes, 1)
	require.True(t, st.Nodes[0].Live)
	require.Len(t, st.Nodes[0].Partitions, 8)
	require.Equal(t, partitions{Total: 8, ByOwner: 8}, st.Partitions)
	slow := st.Kinds[0]
	require.Equal(t, "slow", slow.Kind)
	require.EqualValues(t, 1, *slow.Due)
	require.True(t, slow.Paused)
	require.NotNil(t, slow.PausedAt)
	require.Positive(t, *slow.LagSeconds, "the paused kind's task waits")
	require.NotNil(t, slow.OldestDueAt)
	require.Zero(t, st.LagSeconds, "a paused kind's wait is not the cluster's lag")

	out := b.ok(t, "status")
	require.Contains(t, out, "nodes       1 (1 live), leader cli-node\n")
	require.Contains(t, out, "partitions  8: 8 served by their owner, 0 by a stand-in, 0 unserved (0 unassigned)\n")
	require.Regexp(t, `\ncli-node\s+yes\s+yes\s+\S+ ago\s+8\s+-\s+-\s+`, out)
	require.Regexp(t, `\nslow\s+1\s+1\s+0\s+0\s+since \S+\s+\S+s\n`, out)
	require.Equal(t, 0, runs.count("held"), "the paused kind did not run")

	out = b.ok(t, "kinds", "list")
	require.Regexp(t, `^KIND\s+PENDING\s+DUE\s+RUNNING\s+DEAD\s+PAUSED\n`, out)
	require.NotContains(t, out, "LAG")

	require.Equal(t, "resumed kind slow\n", b.ok(t, "kinds", "resume", "slow"))
	eventually(t, 10*time.Second, func() bool { return runs.count("held") == 1 }, "the resumed kind runs")
	require.Equal(t, "kind slow was not paused already\n", b.ok(t, "kinds", "resume", "slow"))
	var kinds []kindCount
	b.okJSON(t, &kinds, "kinds", "list")
	for _, k := range kinds {
		require.False(t, k.Paused, k.Kind)
		require.Nil(t, k.LagSeconds, "kinds list reads the counts alone")
	}
}

// TestStatusIdle: with no node, status says so: no leader, every
// partition unassigned, counts never taken; a due task's lag shows, its
// counts unknown.
func TestStatusIdle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.db.InsertTask(t, pgtest.TaskRow{OrderingID: "o", ScheduledAt: time.Now().Add(-time.Minute), Kind: "late", State: "pending"})
	out := b.ok(t, "status")
	require.Contains(t, out, "nodes       0 (0 live), leader none\n")
	require.Contains(t, out, "8 unserved (8 unassigned)")
	require.Contains(t, out, "counted     never")
	require.Regexp(t, `\nlate\s+-\s+-\s+-\s+-\s+no\s+1m\ds\n`, out)
	require.Regexp(t, `lag\s+1m\ds`, out)

	var st status
	b.okJSON(t, &st, "status")
	require.Empty(t, st.Leader)
	require.Empty(t, st.Nodes)
	require.Nil(t, st.CountedAt)
	require.Len(t, st.Kinds, 1)
	require.Nil(t, st.Kinds[0].Pending, "not counted yet")
	require.InDelta(t, 60, st.LagSeconds, 30)

	b.countKinds(t)
	b.okJSON(t, &st, "status")
	require.NotNil(t, st.CountedAt)
	require.EqualValues(t, 1, *st.Kinds[0].Due)
	require.True(t, strings.HasPrefix(b.ok(t, "kinds", "list"), "KIND"))
}

// TestLimitsSetListClear: limits set limits a kind (a bad limit exits 2,
// as a usage error, with the reason), limits list shows it, limits clear
// removes it.
func TestLimitsSetListClear(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Equal(t, "limited kind mail\n", b.ok(t, "limits", "set", "-max-running", "2", "mail"))
	require.Equal(t, "changed the limit of kind mail\n", b.ok(t, "limits", "set", "-max-running", "2", "-max-starts", "5", "-per", "1s", "mail"))
	r := b.cli(t, "limits", "set", "-max-starts", "5", "mail")
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "max_starts and per go together")

	out := b.ok(t, "limits", "list")
	require.Contains(t, out, "KIND")
	require.Regexp(t, `mail\s+2\s+0\s+5 per 1s\s+0\s+0\s+no`, out)
	var rows []struct {
		Kind       string   `json:"kind"`
		MaxRunning *int     `json:"max_running"`
		MaxStarts  *int     `json:"max_starts"`
		PerSeconds *float64 `json:"per_seconds"`
		Running    int      `json:"running"`
	}
	b.okJSON(t, &rows, "limits", "list")
	require.Len(t, rows, 1)
	require.Equal(t, 2, *rows[0].MaxRunning)
	require.Equal(t, 5, *rows[0].MaxStarts)
	require.InDelta(t, 1, *rows[0].PerSeconds, 1e-9)

	require.Equal(t, "cleared the limit of kind mail\n", b.ok(t, "limits", "clear", "mail"))
	require.Equal(t, "kind mail had no limit\n", b.ok(t, "limits", "clear", "mail"))
	b.okJSON(t, &rows, "limits", "list")
	require.Empty(t, rows)
}

// TestLimitsWeight: limits weight gives a group a weight and says the one
// it had (a bad weight exits 2 with the reason), limits weights lists it,
// and weight 1 removes it.
func TestLimitsWeight(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Equal(t, "group gold of kind export: weight 3 (was 1)\n", b.ok(t, "limits", "weight", "export", "gold", "3"))
	require.Equal(t, "group gold of kind export: weight 5 (was 3)\n", b.ok(t, "limits", "weight", "export", "gold", "5"))
	for _, bad := range []string{"0", "1001", "x"} {
		r := b.cli(t, "limits", "weight", "export", "gold", bad)
		require.Equal(t, exitUsage, r.code, r.stderr)
		require.Contains(t, r.stderr, "weight must be", bad)
	}
	out := b.ok(t, "limits", "weights")
	require.Regexp(t, `export\s+gold\s+5\s+no`, out)
	var rows []struct {
		Kind     string `json:"kind"`
		GroupKey string `json:"group_key"`
		Weight   int    `json:"weight"`
	}
	b.okJSON(t, &rows, "limits", "weights")
	require.Equal(t, 1, len(rows))
	require.Equal(t, 5, rows[0].Weight)
	require.Equal(t, "group gold of kind export: weight 1 (was 5)\n", b.ok(t, "limits", "weight", "export", "gold", "1"))
	b.okJSON(t, &rows, "limits", "weights")
	require.Empty(t, rows)
}
