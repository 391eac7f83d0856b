package pgsched_test

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
)

// childTTL is the lease TTL of child workers (see childWorker).
const childTTL = 3 * time.Second

// clusterRow is a row of the pgsched.cluster view.
type clusterRow struct {
	NodeID        string
	Epoch         int64
	Live          bool
	Leader        bool
	Partitions    []int32
	Backup        *string
	StandingInFor []string
}

func clusterRows(t *testing.T, db *pgtest.DB) []clusterRow {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(),
		"SELECT node_id, epoch, live, leader, partitions, backup, standing_in_for FROM "+db.Schema+".cluster ORDER BY node_id")
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[clusterRow])
	require.NoError(t, err)
	return out
}

func row(rows []clusterRow, node string) (clusterRow, bool) {
	for _, r := range rows {
		if r.NodeID == node {
			return r, true
		}
	}
	return clusterRow{}, false
}

func leadersOf(rows []clusterRow) []string {
	var out []string
	for _, r := range rows {
		if r.Leader {
			out = append(out, r.NodeID)
		}
	}
	return out
}

// servedBy maps each partition to the node serving it (pgsched.partitions).
func servedBy(t *testing.T, db *pgtest.DB) map[int32]string {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), "SELECT partition_id, coalesce(served_by, '') FROM "+db.Schema+".partitions")
	require.NoError(t, err)
	out := map[int32]string{}
	for rows.Next() {
		var p int32
		var s string
		require.NoError(t, rows.Scan(&p, &s))
		out[p] = s
	}
	require.NoError(t, rows.Err())
	return out
}

// settled reports whether exactly the given nodes are live, one of them
// leads, every partition is owned by one of them in a balanced way, and
// each has a backup (when there are two or more).
func settled(rows []clusterRow, nodes []string, partitions int) bool {
	if len(leadersOf(rows)) != 1 {
		return false
	}
	total, lo, hi := 0, partitions, 0
	for _, n := range nodes {
		r, ok := row(rows, n)
		if !ok || !r.Live || (len(nodes) > 1 && r.Backup == nil) {
			return false
		}
		total += len(r.Partitions)
		lo, hi = min(lo, len(r.Partitions)), max(hi, len(r.Partitions))
	}
	return total == partitions && hi-lo <= 1
}

func waitSettled(t *testing.T, db *pgtest.DB, nodes []string) []clusterRow {
	t.Helper()
	var rows []clusterRow
	eventually(t, 20*time.Second, func() bool {
		rows = clusterRows(t, db)
		return settled(rows, nodes, 8)
	}, "cluster of %v settles", nodes)
	return rows
}

// idIn returns a grid ordering_id (id-NNNN, NNNN < ids) in one of parts.
func idIn(t *testing.T, ids int, parts []int32) string {
	t.Helper()
	for i := range ids {
		id := fmt.Sprintf("id-%04d", i)
		if slices.Contains(parts, int32(pgsched.Partition(id, 8))) {
			return id
		}
	}
	t.Fatalf("no ordering_id among %d in partitions %v", ids, parts)
	return ""
}

// checkRerunsFrom asserts that every task that ran more than once first ran
// on the victim, before it was killed, and ran again as a later attempt:
// the only re-runs are of work whose outcome died with the victim.
func checkRerunsFrom(t *testing.T, db *pgtest.DB, victim string, killed time.Time) {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `
		SELECT ordering_id, uk, array_agg(node ORDER BY started), array_agg(attempt ORDER BY started), min(started)
		FROM `+db.Schema+`.execlog GROUP BY ordering_id, uk HAVING count(*) > 1`)
	require.NoError(t, err)
	n := 0
	for rows.Next() {
		var id, uk string
		var nodes []string
		var attempts []int
		var first time.Time
		require.NoError(t, rows.Scan(&id, &uk, &nodes, &attempts, &first))
		require.Equal(t, victim, nodes[0], "%s/%s re-ran: its first run was on the victim %v", id, uk, nodes)
		require.True(t, first.Before(killed), "%s/%s: first run started before the kill", id, uk)
		for i := 1; i < len(attempts); i++ {
			require.Greater(t, attempts[i], attempts[i-1], "%s/%s: a re-run is a later attempt", id, uk)
		}
		n++
	}
	require.NoError(t, rows.Err())
	t.Logf("%d tasks whose outcome died with %s ran again", n, victim)
}

// TestLeaderFailover: three nodes elect one leader; SIGKILL it and another
// takes over once its lease runs out (well within two TTLs, where waiting
// for the dead node's depletion would take the minute of its flex-down);
// from then on the view never shows two.
func TestLeaderFailover(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	createExecLog(t, b.db)
	nodes := []string{"lead-0", "lead-1", "lead-2"}
	kids := map[string]*child{}
	for _, n := range nodes {
		kids[n] = startChild(t, b.db, n, 0, 5, time.Second)
	}
	rows := waitSettled(t, b.db, nodes)
	old := leadersOf(rows)[0]
	killed := time.Now()
	require.NoError(t, kids[old].cmd.Process.Signal(syscall.SIGKILL))
	_ = kids[old].cmd.Wait()

	var took time.Duration
	eventually(t, 3*childTTL, func() bool {
		ls := leadersOf(clusterRows(t, b.db))
		require.LessOrEqual(t, len(ls), 1, "at most one leader at any time: %v", ls)
		if len(ls) == 1 && ls[0] != old {
			took = time.Since(killed)
			return true
		}
		return false
	}, "a new leader after %s was killed", old)
	t.Logf("leader %s SIGKILLed; new leader after %s (lease TTL %s)", old, took.Round(time.Millisecond), childTTL)
	require.LessOrEqual(t, took, pgtest.Patience(2*childTTL), "a new leader once the old one's lease ran out")

	// From now on exactly one leader, every time we look.
	for range 100 {
		ls := leadersOf(clusterRows(t, b.db))
		require.Len(t, ls, 1, "exactly one leader: %v", ls)
		time.Sleep(20 * time.Millisecond)
	}
	// The survivors take the dead leader's partitions once it is depleted;
	// until then its backup serves them: nothing is left unserved.
	eventually(t, 2*childTTL, func() bool {
		for _, s := range servedBy(t, b.db) {
			if s == "" || s == old {
				return false
			}
		}
		return true
	}, "every partition served by a live node")
}

// TestStandInAndReturn: SIGKILL one of three nodes while tasks are due on
// every partition. Its backup serves its partitions once its lease runs
// out (well within two TTLs, not at its depletion a minute later) and
// re-runs its in-flight task; when the node comes back with the same id
// the stand-in stops and the node serves its partitions again. Every task
// runs, in order, with no overlap.
func TestStandInAndReturn(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	createExecLog(t, b.db)
	nodes := []string{"si-0", "si-1", "si-2"}
	kids := map[string]*child{}
	for _, n := range nodes {
		kids[n] = startChild(t, b.db, n, 5*time.Millisecond, 10, time.Second, "CHILD_FLEXDOWN=60s")
	}
	rows := waitSettled(t, b.db, nodes)
	victim, _ := row(rows, "si-0")
	backup := *victim.Backup
	const ids, perID = 200, 30
	holdID := idIn(t, ids, victim.Partitions)
	scheduleGridKinds(t, b, ids, perID, 15*time.Second, func(id string, s int) string {
		if id == holdID && s == 0 {
			return "hold" // stays in flight on the victim until it dies
		}
		return "default"
	})
	kids["si-0"].waitLine(t, "RUNNING "+holdID, 20*time.Second)
	eventually(t, 20*time.Second, func() bool {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(context.Background(),
			"SELECT count(*) FROM "+b.db.Schema+".execlog WHERE node = 'si-0'").Scan(&n))
		return n > 20
	}, "the victim runs tasks")

	killed := time.Now()
	require.NoError(t, kids["si-0"].cmd.Process.Signal(syscall.SIGKILL))
	_ = kids["si-0"].cmd.Wait()

	// Resumption: the first run on the backup, in the victim's partitions,
	// that started after the kill.
	var resumed time.Duration
	eventually(t, 4*childTTL, func() bool {
		var first *time.Time
		require.NoError(t, b.db.Pool.QueryRow(context.Background(),
			"SELECT min(started) FROM "+b.db.Schema+".execlog WHERE node = $1 AND started > $2 AND "+
				b.db.Schema+".partition_of(ordering_id, 8) = ANY($3)", backup, killed, victim.Partitions).Scan(&first))
		if first == nil {
			return false
		}
		resumed = first.Sub(killed)
		return true
	}, "the victim's partitions resume on its backup %s", backup)
	t.Logf("node si-0 SIGKILLed; its partitions resumed on backup %s after %s (lease TTL %s)", backup, resumed.Round(time.Millisecond), childTTL)
	require.LessOrEqual(t, resumed, pgtest.Patience(2*childTTL), "resumed once the victim's lease ran out")

	r, _ := row(clusterRows(t, b.db), backup)
	require.Equal(t, []string{"si-0"}, r.StandingInFor, "pgsched.cluster shows the stand-in")
	eventually(t, 10*time.Second, func() bool {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(context.Background(),
			"SELECT count(*) FROM "+b.db.Schema+".execlog WHERE ordering_id = $1 AND uk = '00000' AND attempt = 2 AND node = $2",
			holdID, backup).Scan(&n))
		return n == 1
	}, "the victim's in-flight task re-ran on the stand-in")

	// Return inside the flex-down window, under the same id.
	back := time.Now()
	kids["si-0"] = startChild(t, b.db, "si-0", 5*time.Millisecond, 10, time.Second, "CHILD_FLEXDOWN=60s")
	eventually(t, 10*time.Second, func() bool {
		rows := clusterRows(t, b.db)
		r, _ := row(rows, backup)
		if len(r.StandingInFor) != 0 {
			return false
		}
		served := servedBy(t, b.db)
		for _, p := range victim.Partitions {
			if served[p] != "si-0" {
				return false
			}
		}
		return true
	}, "the stand-in stops and si-0 serves its partitions again")
	handedBack := time.Now()
	eventually(t, 20*time.Second, func() bool {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(context.Background(),
			"SELECT count(*) FROM "+b.db.Schema+".execlog WHERE node = 'si-0' AND started > $1", back).Scan(&n))
		return n > 0
	}, "the returned node runs tasks again")

	waitDrained(t, b, 2*time.Minute)
	checkLog(t, b.db, ids, perID)
	checkRerunsFrom(t, b.db, "si-0", killed)
	// Once the stand-in stopped (as the view says), it claims nothing more
	// from those partitions: it hears of it by NOTIFY, or at its next
	// cluster round (250 ms), and a node that missed rounds for a whole
	// TTL would have lost its lease.
	var late int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		"SELECT count(*) FROM "+b.db.Schema+".execlog WHERE node = $1 AND started > $2 AND "+
			b.db.Schema+".partition_of(ordering_id, 8) = ANY($3)", backup, handedBack.Add(childTTL), victim.Partitions).Scan(&late))
	require.Zero(t, late, "the former stand-in kept running tasks of partitions handed back")
}

// TestDepletion: a node that stays down past the flex-down window is
// removed by the leader and its partitions go to the live nodes.
func TestDepletion(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	createExecLog(t, b.db)
	nodes := []string{"dep-0", "dep-1", "dep-2"}
	kids := map[string]*child{}
	for _, n := range nodes {
		kids[n] = startChild(t, b.db, n, 0, 5, time.Second, "CHILD_FLEXDOWN=2s")
	}
	waitSettled(t, b.db, nodes)
	scheduleGrid(t, b, 50, 4, 2*time.Second, "default")
	killed := time.Now()
	require.NoError(t, kids["dep-1"].cmd.Process.Signal(syscall.SIGKILL))
	_ = kids["dep-1"].cmd.Wait()
	waitSettled(t, b.db, []string{"dep-0", "dep-2"})
	t.Logf("dep-1 SIGKILLed; depleted and its partitions reassigned after %s (TTL %s + flex-down 2s)", time.Since(killed).Round(time.Millisecond), childTTL)
	rows := clusterRows(t, b.db)
	_, present := row(rows, "dep-1")
	require.False(t, present, "the node's row is removed")
	var owned, backups int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		"SELECT (SELECT count(*) FROM "+b.db.Schema+".partition_owners WHERE node_id = 'dep-1'), "+
			"(SELECT count(*) FROM "+b.db.Schema+".backups WHERE 'dep-1' IN (node_id, backup_node_id))").Scan(&owned, &backups))
	require.Zero(t, owned, "no partition left to the depleted node")
	require.Zero(t, backups, "no backup pair left with the depleted node")
	waitDrained(t, b, time.Minute)
	checkLog(t, b.db, 50, 4)
}

// TestFencingAfterFreeze: SIGSTOP a node longer than its TTL while it runs
// a task, then SIGCONT. Its backup re-runs the task and records the
// outcome; the frozen node's late completion changes nothing; the node
// re-registers under a new epoch. The only overlapping runs in the log are
// the frozen one with those that ran meanwhile.
func TestFencingAfterFreeze(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	createExecLog(t, b.db)
	nodes := []string{"fz-a", "fz-b"}
	kids := map[string]*child{}
	for _, n := range nodes {
		kids[n] = startChild(t, b.db, n, 0, 5, time.Second)
	}
	rows := waitSettled(t, b.db, nodes)
	a, _ := row(rows, "fz-a")
	id := idIn(t, 100, a.Partitions)
	now := time.Now()
	tasks := []pgsched.Task{{OrderingID: id, ScheduledAt: now, UniquenessKey: "00000", Kind: "stubborn"}}
	for s := 1; s <= 3; s++ {
		tasks = append(tasks, pgsched.Task{OrderingID: id, ScheduledAt: now.Add(time.Duration(s) * time.Millisecond), UniquenessKey: fmt.Sprintf("%05d", s)})
	}
	_, err := b.client.ScheduleMany(context.Background(), tasks)
	require.NoError(t, err)
	kids["fz-a"].waitLine(t, "RUNNING "+id, 20*time.Second)
	require.NoError(t, kids["fz-a"].cmd.Process.Signal(syscall.SIGSTOP))
	frozen := true
	defer func() {
		if frozen {
			_ = kids["fz-a"].cmd.Process.Signal(syscall.SIGCONT)
		}
	}()

	eventually(t, 4*childTTL, func() bool {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(context.Background(),
			"SELECT count(*) FROM "+b.db.Schema+".execlog WHERE ordering_id = $1 AND node = 'fz-b'", id).Scan(&n))
		return n == 4
	}, "fz-b stands in, re-runs the task and the ones after it")
	r, _ := row(clusterRows(t, b.db), "fz-b")
	require.Equal(t, []string{"fz-a"}, r.StandingInFor)
	require.NoError(t, kids["fz-a"].cmd.Process.Signal(syscall.SIGCONT))
	frozen = false

	eventually(t, 20*time.Second, func() bool {
		r, ok := row(clusterRows(t, b.db), "fz-a")
		return ok && r.Live && r.Epoch > a.Epoch
	}, "fz-a re-registers under a new epoch")
	eventually(t, 20*time.Second, func() bool {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(context.Background(),
			"SELECT count(*) FROM "+b.db.Schema+".execlog WHERE ordering_id = $1 AND node = 'fz-a'", id).Scan(&n))
		return n == 1
	}, "the frozen run finishes late")
	// Its outcome reaches the finisher right after; stop the node so every
	// pending write is flushed, then look.
	require.NoError(t, kids["fz-a"].cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, kids["fz-a"].cmd.Wait())

	var node string
	var attempt int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		"SELECT node_id, attempt FROM "+b.db.Schema+".completions WHERE ordering_id = $1 AND uniqueness_key = '00000'", id).Scan(&node, &attempt))
	require.Equal(t, "fz-b", node, "the new owner's outcome stands")
	require.Equal(t, 2, attempt)
	require.Equal(t, 4, countRows(t, b, "completions"), "one completion per task, none from the late run")
	require.Equal(t, 0, countRows(t, b, "dead_tasks"))
	require.Equal(t, 0, countRows(t, b, "tasks"))

	type run struct {
		UK, Node       string
		Attempt        int
		Started, Ended time.Time
	}
	logRows, err := b.db.Pool.Query(context.Background(),
		"SELECT uk, node, attempt, started, ended FROM "+b.db.Schema+".execlog WHERE ordering_id = $1 ORDER BY started", id)
	require.NoError(t, err)
	runs, err := pgx.CollectRows(logRows, pgx.RowToStructByPos[run])
	require.NoError(t, err)
	require.Len(t, runs, 5, "four tasks, one of them run twice")
	zombie := func(r run) bool { return r.Node == "fz-a" && r.UK == "00000" && r.Attempt == 1 }
	overlaps := 0
	for i := range runs {
		for j := i + 1; j < len(runs); j++ {
			if runs[j].Started.Before(runs[i].Ended) {
				require.True(t, zombie(runs[i]) || zombie(runs[j]), "only the frozen run overlaps others: %+v and %+v", runs[i], runs[j])
				overlaps++
			}
		}
	}
	require.Positive(t, overlaps, "the frozen run overlapped its re-run")
}

// TestScaleOutAndIn: two nodes join a steady run and own partitions at
// once (the join travels by NOTIFY: well within a lease TTL); one leaves
// with SIGTERM and its partitions are owned elsewhere well within a TTL of
// its exit (a leave is planned when it begins, where a node that died
// waits for its lease to run out and then its flex-down). Order holds
// throughout and nothing runs twice.
func TestScaleOutAndIn(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	createExecLog(t, b.db)
	kids := map[string]*child{}
	for _, n := range []string{"sc-0", "sc-1"} {
		kids[n] = startChild(t, b.db, n, 2*time.Millisecond, 10, 2*time.Second)
	}
	waitSettled(t, b.db, []string{"sc-0", "sc-1"})
	const ids, perID = 100, 40
	scheduleGrid(t, b, ids, perID, 10*time.Second, "default")

	for _, n := range []string{"sc-2", "sc-3"} {
		kids[n] = startChild(t, b.db, n, 2*time.Millisecond, 10, 2*time.Second)
		joined := time.Now()
		eventually(t, 10*time.Second, func() bool {
			r, ok := row(clusterRows(t, b.db), n)
			return ok && len(r.Partitions) > 0
		}, "%s owns partitions", n)
		took := time.Since(joined)
		t.Logf("%s joined; owns partitions after %s", n, took.Round(time.Millisecond))
		require.LessOrEqual(t, took, pgtest.Patience(childTTL), "a new node owns partitions within a lease TTL")
	}
	waitSettled(t, b.db, []string{"sc-0", "sc-1", "sc-2", "sc-3"})

	require.NoError(t, kids["sc-1"].cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, kids["sc-1"].cmd.Wait())
	exited := time.Now()
	eventually(t, 10*time.Second, func() bool {
		served := servedBy(t, b.db)
		var owners []string
		require.NoError(t, b.db.Pool.QueryRow(context.Background(),
			"SELECT coalesce(array_agg(DISTINCT node_id), '{}') FROM "+b.db.Schema+".partition_owners").Scan(&owners))
		if slices.Contains(owners, "sc-1") || slices.Contains(owners, "") {
			return false
		}
		for _, s := range served {
			if s == "" {
				return false
			}
		}
		return true
	}, "sc-1's partitions owned elsewhere")
	took := time.Since(exited)
	t.Logf("sc-1 left with SIGTERM; its partitions owned elsewhere %s after it exited", took.Round(time.Millisecond))
	require.LessOrEqual(t, took, pgtest.Patience(childTTL), "partitions of a leaving node owned elsewhere within a lease TTL of its exit")

	waitDrained(t, b, 2*time.Minute)
	require.Zero(t, checkLog(t, b.db, ids, perID), "a graceful scale-in re-runs nothing")
}

// TestLeaveHandsOverAtOnce: a node stopping with SIGTERM hands its
// partitions over when the stop begins, not when its drain ends: while it
// still drains a long task, new tasks in its partitions run elsewhere.
func TestLeaveHandsOverAtOnce(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	createExecLog(t, b.db)
	kids := map[string]*child{}
	for _, n := range []string{"lv-a", "lv-b"} {
		kids[n] = startChild(t, b.db, n, 0, 5, 5*time.Second)
	}
	rows := waitSettled(t, b.db, []string{"lv-a", "lv-b"})
	a, _ := row(rows, "lv-a")
	holdID := idIn(t, 100, a.Partitions)
	_, err := b.client.Schedule(context.Background(), pgsched.Task{OrderingID: holdID, ScheduledAt: time.Now(), UniquenessKey: "00000", Kind: "hold"})
	require.NoError(t, err)
	kids["lv-a"].waitLine(t, "RUNNING "+holdID, 20*time.Second)

	stopped := time.Now()
	require.NoError(t, kids["lv-a"].cmd.Process.Signal(syscall.SIGTERM))
	eventually(t, 5*time.Second, func() bool {
		for _, p := range a.Partitions {
			if servedBy(t, b.db)[p] != "lv-b" {
				return false
			}
		}
		return true
	}, "lv-b serves lv-a's partitions")
	took := time.Since(stopped)
	t.Logf("lv-a got SIGTERM; its partitions served by lv-b after %s, while lv-a drains", took.Round(time.Millisecond))

	// A new task in lv-a's partitions runs on lv-b while lv-a still drains
	// (its hold task only ends at lv-a's 5s drain timeout).
	other := ""
	for i := range 100 {
		id := fmt.Sprintf("id-%04d", i)
		if id != holdID && slices.Contains(a.Partitions, int32(pgsched.Partition(id, 8))) {
			other = id
			break
		}
	}
	require.NotEmpty(t, other)
	_, err = b.client.Schedule(context.Background(), pgsched.Task{OrderingID: other, ScheduledAt: time.Now(), UniquenessKey: "00000"})
	require.NoError(t, err)
	eventually(t, 5*time.Second, func() bool {
		var node string
		_ = b.db.Pool.QueryRow(context.Background(), "SELECT node FROM "+b.db.Schema+".execlog WHERE ordering_id = $1", other).Scan(&node)
		return node == "lv-b"
	}, "the new task runs on lv-b")
	// It deregisters only when its drain ends: a live row means it still
	// drains, under its lease, marked leaving.
	var live, leaving bool
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		"SELECT live, leaving FROM "+b.db.Schema+".cluster WHERE node_id = 'lv-a'").Scan(&live, &leaving))
	require.True(t, live, "lv-a keeps its lease while it drains")
	require.True(t, leaving)

	require.NoError(t, kids["lv-a"].cmd.Wait())
	waitDrained(t, b, 20*time.Second)
	var attempt int
	var node string
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		"SELECT attempt, node FROM "+b.db.Schema+".execlog WHERE ordering_id = $1", holdID).Scan(&attempt, &node))
	require.Equal(t, 2, attempt, "the task lv-a gave back at its drain timeout ran again")
	require.Equal(t, "lv-b", node)
}
