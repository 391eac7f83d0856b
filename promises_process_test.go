package pgsched_test

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
)

// With PGSCHED_TEST_CHILD=starts (given after spawnChild's own setting,
// which it overrides), the test binary runs a worker whose handler prints
// "START <ordering_id> <attempt> <unix nanoseconds>" the moment it is
// called, before anything that could notice a cancelled context, then
// runs as long as CHILD_SLEEP says (or until its context ends). A start
// is on record even when the handler's context is already cancelled.
func init() {
	if os.Getenv("PGSCHED_TEST_CHILD") != "starts" {
		return
	}
	if err := startsWorker(); err != nil {
		fmt.Fprintln(os.Stderr, "child worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func startsWorker() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	env := os.Getenv
	conc, _ := strconv.Atoi(env("CHILD_CONCURRENCY"))
	sleep, _ := time.ParseDuration(env("CHILD_SLEEP"))
	pcfg, err := pgxpool.ParseConfig(env("CHILD_URL"))
	if err != nil {
		return err
	}
	pcfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	cfg := fastConfig(env("CHILD_SCHEMA"))
	cfg.NodeID = env("CHILD_NODE")
	cfg.LeaseTTL = childTTL
	cfg.ClusterInterval = 250 * time.Millisecond
	cfg.Concurrency = conc
	cfg.DrainTimeout, _ = time.ParseDuration(env("CHILD_DRAIN"))
	if d, err := time.ParseDuration(env("CHILD_CLAIM_AHEAD")); err == nil {
		cfg.ClaimAhead = d
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.Handlers = map[string]pgsched.Handler{"*": pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error {
		fmt.Printf("START %s %d %d\n", job.OrderingID, job.Attempt, time.Now().UnixNano())
		d := sleep
		if job.Kind == "hold" && job.Attempt == 1 {
			d = time.Hour
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	})}
	w, err := pgsched.NewWorker(pool, cfg)
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	fmt.Println("STARTED", cfg.NodeID)
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return w.Stop(sctx)
}

// childStart is a START line of a "starts" child.
type childStart struct {
	OrderingID string
	Attempt    int
	At         time.Time
}

// starts collects the START lines c printed until its output ends (it
// exited) or within passes.
func (c *child) starts(t *testing.T, within time.Duration) []childStart {
	t.Helper()
	var out []childStart
	deadline := time.After(within)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				return out
			}
			f := strings.Fields(l)
			if len(f) != 4 || f[0] != "START" {
				continue
			}
			attempt, err := strconv.Atoi(f[2])
			require.NoError(t, err, l)
			ns, err := strconv.ParseInt(f[3], 10, 64)
			require.NoError(t, err, l)
			out = append(out, childStart{OrderingID: f[1], Attempt: attempt, At: time.Unix(0, ns)})
		case <-deadline:
			return out
		}
	}
}

// idsIn returns n grid ordering_ids (id-NNNN) in parts.
func idsIn(n int, parts []int32) []string {
	var ids []string
	for i := 0; len(ids) < n; i++ {
		if id := fmt.Sprintf("id-%04d", i); slices.Contains(parts, int32(pgsched.Partition(id, 8))) {
			ids = append(ids, id)
		}
	}
	return ids
}

// TestStandInGivesBackAtOnce: when a node that is not the leader is
// killed, its backup stands in within the TTL and gives back the task the
// dead node was running, which then runs again on the stand-in within
// seconds, not at the leader's sweep for orphans (once a minute). (When
// the dead node led, its successor's first sweep gives the tasks back too,
// which hides a stand-in that does not.)
func TestStandInGivesBackAtOnce(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	nodes := []string{"gb-0", "gb-1", "gb-2"}
	kids := map[string]*child{}
	for _, n := range nodes {
		kids[n] = startChild(t, b.db, n, 0, 5, time.Second, "PGSCHED_TEST_CHILD=starts")
	}
	// The victim is the node that starts the task, as the cluster stands
	// then: on a loaded machine a lease may lapse and partitions move
	// between the settled read and the start. A task that starts on the
	// leader is left running, and another is tried.
	var victim clusterRow
	var holdID string
	for attempt := 0; victim.NodeID == ""; attempt++ {
		require.Less(t, attempt, 3, "the held task started on the leader every time")
		rows := waitSettled(t, b.db, nodes)
		idx := slices.IndexFunc(rows, func(r clusterRow) bool { return !r.Leader })
		require.GreaterOrEqual(t, idx, 0)
		holdID = idsIn(attempt+1, rows[idx].Partitions)[attempt]
		_, err := b.client.Schedule(context.Background(), pgsched.Task{OrderingID: holdID, ScheduledAt: time.Now(), Kind: "hold"})
		require.NoError(t, err)
		ran := waitAnyLine(t, maps.Values(kids), "START "+holdID+" 1", 20*time.Second)
		if r, ok := row(clusterRows(t, b.db), ran.node); ok && !r.Leader && r.Backup != nil {
			victim = r
		}
	}

	killed := time.Now()
	require.NoError(t, kids[victim.NodeID].cmd.Process.Signal(syscall.SIGKILL))
	_ = kids[victim.NodeID].cmd.Wait()
	kids[*victim.Backup].waitLine(t, "START "+holdID+" 2", 20*time.Second)
	took := time.Since(killed)
	t.Logf("%s SIGKILLed while running %s; its backup %s ran it again after %s (lease TTL %s)",
		victim.NodeID, holdID, *victim.Backup, took.Round(time.Millisecond), childTTL)
}

// waitAnyLine waits for a printed line starting with prefix from any of
// kids, and returns the child that printed it.
func waitAnyLine(t *testing.T, kids iter.Seq[*child], prefix string, within time.Duration) *child {
	t.Helper()
	within = pgtest.Patience(within)
	found := make(chan *child, 1)
	stop := make(chan struct{})
	defer close(stop)
	for c := range kids {
		go func() {
			for {
				select {
				case l, ok := <-c.lines:
					if !ok {
						return
					}
					if strings.HasPrefix(l, prefix) {
						select {
						case found <- c:
						default:
						}
						return
					}
				case <-stop:
					return
				}
			}
		}()
	}
	select {
	case c := <-found:
		return c
	case <-time.After(within):
		t.Fatalf("no child printed %q within %s", prefix, within)
		return nil
	}
}

// TestThawedNodeStartsNothingOfItsTerm: a node claims 120 tasks ahead of
// their time and is frozen (SIGSTOP) before they are due, for longer than
// its TTL; its backup stands in and runs them all. When the node thaws,
// every timer of those tasks is overdue and its goroutines race the lease
// goroutine that would notice the lost term: none of the 120 may start
// on it, since its lease deadline has passed by its own clock (the check
// before each start). The handler records its start before anything
// could see a cancelled context, so a start is a start.
func TestThawedNodeStartsNothingOfItsTerm(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	nodes := []string{"tw-a", "tw-b"}
	kids := map[string]*child{}
	for _, n := range nodes {
		kids[n] = startChild(t, b.db, n, 0, 64, time.Second, "PGSCHED_TEST_CHILD=starts", "CHILD_CLAIM_AHEAD=1s")
	}
	rows := waitSettled(t, b.db, nodes)
	a, _ := row(rows, "tw-a")
	ids := idsIn(120, a.Partitions)
	at := time.Now().Add(3 * time.Second)
	var tasks []pgsched.Task
	for _, id := range ids {
		tasks = append(tasks, pgsched.Task{OrderingID: id, ScheduledAt: at})
	}
	_, err := b.client.ScheduleMany(context.Background(), tasks)
	require.NoError(t, err)
	eventually(t, 10*time.Second, func() bool {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(context.Background(),
			"SELECT count(*) FROM "+b.db.Schema+".tasks WHERE node_id = 'tw-a'").Scan(&n))
		return n == len(ids)
	}, "tw-a claims the tasks")
	require.NoError(t, kids["tw-a"].cmd.Process.Signal(syscall.SIGSTOP))
	frozen := time.Now()
	thawed := false
	defer func() {
		if !thawed {
			_ = kids["tw-a"].cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	t.Logf("tw-a frozen %s before the tasks are due", at.Sub(frozen).Round(time.Millisecond))

	// Thawed only once its lease deadline (its last renewal, sent before
	// the freeze, plus the TTL) has surely passed.
	eventually(t, 4*childTTL+10*time.Second, func() bool {
		return time.Since(frozen) > childTTL && countRows(t, b, "completions") == len(ids)
	}, "tw-b stands in and runs them, and the TTL passes")
	require.NoError(t, kids["tw-a"].cmd.Process.Signal(syscall.SIGCONT))
	thawed = true
	eventually(t, 20*time.Second, func() bool {
		r, ok := row(clusterRows(t, b.db), "tw-a")
		return ok && r.Live && r.Epoch > a.Epoch
	}, "tw-a registers again under a new epoch")
	// Stop it so that anything it would still start has started, then look.
	require.NoError(t, kids["tw-a"].cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, kids["tw-a"].cmd.Wait())
	for _, s := range kids["tw-a"].starts(t, 10*time.Second) {
		if slices.Contains(ids, s.OrderingID) {
			require.True(t, s.At.Before(frozen), "tw-a started %s (attempt %d) at %s, after it was frozen at %s",
				s.OrderingID, s.Attempt, s.At.Format(time.StampMicro), frozen.Format(time.StampMicro))
		}
	}
}
