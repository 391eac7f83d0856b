package pgsched_test

import (
	"context"
	"fmt"
	"log/slog"
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
	rows := waitSettled(t, b.db, nodes)
	var victim clusterRow
	for _, r := range rows {
		if !r.Leader {
			victim = r
			break
		}
	}
	require.NotNil(t, victim.Backup)
	holdID := idsIn(1, victim.Partitions)[0]
	_, err := b.client.Schedule(context.Background(), pgsched.Task{OrderingID: holdID, ScheduledAt: time.Now(), Kind: "hold"})
	require.NoError(t, err)
	kids[victim.NodeID].waitLine(t, "START "+holdID+" 1", 20*time.Second)

	killed := time.Now()
	require.NoError(t, kids[victim.NodeID].cmd.Process.Signal(syscall.SIGKILL))
	_ = kids[victim.NodeID].cmd.Wait()
	kids[*victim.Backup].waitLine(t, "START "+holdID+" 2", 20*time.Second)
	took := time.Since(killed)
	t.Logf("%s SIGKILLed while running %s; its backup %s ran it again after %s (lease TTL %s)",
		victim.NodeID, holdID, *victim.Backup, took.Round(time.Millisecond), childTTL)
}
