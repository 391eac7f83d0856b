package pgsched_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
)

// The test binary doubles as a worker process: with PGSCHED_TEST_CHILD set,
// init runs a Worker whose handler records each run in <schema>.execlog and
// exits on SIGTERM. Tests start several and SIGKILL/SIGSTOP them at will.
func init() {
	if os.Getenv("PGSCHED_TEST_CHILD") != "worker" {
		return
	}
	if err := childWorker(); err != nil {
		fmt.Fprintln(os.Stderr, "child worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func childWorker() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	env := os.Getenv
	schema := env("CHILD_SCHEMA")
	sleep, _ := time.ParseDuration(env("CHILD_SLEEP"))
	conc, _ := strconv.Atoi(env("CHILD_CONCURRENCY"))
	pcfg, err := pgxpool.ParseConfig(env("CHILD_URL"))
	if err != nil {
		return err
	}
	pcfg.MaxConns = int32(conc) + 2
	if role := env("CHILD_ROLE"); role != "" {
		// Every connection of the worker's pools works as role, as a login
		// role granted it would.
		pcfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, "SET ROLE "+pgx.Identifier{role}.Sanitize())
			return err
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	cfg := fastConfig(schema)
	cfg.NodeID = env("CHILD_NODE")
	// Several processes share 2 cores with PostgreSQL here: a longer lease
	// than in-process tests keeps a CPU stall from expiring it.
	cfg.LeaseTTL = 3 * time.Second
	cfg.ClusterInterval = 250 * time.Millisecond
	if d, err := time.ParseDuration(env("CHILD_FLEXDOWN")); err == nil {
		cfg.FlexDown = d
	}
	if d, err := time.ParseDuration(env("CHILD_CLAIM_AHEAD")); err == nil {
		cfg.ClaimAhead = d
	}
	if d, err := time.ParseDuration(env("CHILD_MAINTENANCE")); err == nil {
		cfg.MaintenanceInterval = d
	}
	cfg.Concurrency = conc
	cfg.DrainTimeout, _ = time.ParseDuration(env("CHILD_DRAIN"))
	type execer interface {
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	}
	// With CHILD_LOG_PID, execlog's node names the process too (node#pid),
	// for tests of processes that share a node id.
	logNode := cfg.NodeID
	if env("CHILD_LOG_PID") != "" {
		logNode = fmt.Sprintf("%s#%d", cfg.NodeID, os.Getpid())
	}
	run := func(ctx context.Context, db execer, job *pgsched.Job) error {
		start := time.Now()
		d := sleep
		if job.Kind == "slow" {
			d = 20 * time.Second
		}
		if job.Kind == "fail" {
			return fmt.Errorf("always fails")
		}
		switch {
		case job.Kind == "hit":
			// A call to a receiver the test runs (CHILD_HIT_URL), which
			// counts the calls it serves at once; fenced as a side effect
			// must be.
			if err := pgsched.CheckFence(ctx); err != nil {
				return err
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, env("CHILD_HIT_URL")+"?id="+url.QueryEscape(job.OrderingID), nil)
			if err != nil {
				return err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("receiver answered %s", resp.Status)
			}
			return nil
		case job.Kind == "probe":
			// Its side effect is the run's start: written at once, so a
			// run that starts when it must not is on record even if its
			// context is cancelled right after.
			_, err := db.Exec(ctx, "INSERT INTO "+schema+".execlog (ordering_id, uk, node, attempt, started, ended) VALUES ($1, $2, $3, $4, $5, $5)",
				job.OrderingID, job.UniquenessKey, logNode, job.Attempt, start)
			if err != nil {
				return err
			}
			// Then it waits on the network, as a webhook call does: a
			// response that arrives while the process is frozen wakes it
			// first when it thaws, before any timer. It waits db_sleep
			// seconds, or with lock until the test lets go of that
			// advisory lock.
			var p struct {
				DBSleep float64 `json:"db_sleep"`
				Lock    int64   `json:"lock"`
			}
			_ = json.Unmarshal(job.Payload, &p)
			if p.Lock != 0 {
				_, err = db.Exec(ctx, "SELECT pg_advisory_xact_lock_shared($1)", p.Lock)
			} else {
				_, err = db.Exec(ctx, "SELECT pg_sleep($1)", p.DBSleep)
			}
			if errors.Is(context.Cause(ctx), pgsched.ErrTaskCancelled) {
				fmt.Println("CANCELLED", job.OrderingID)
			}
			return err
		case job.Kind == "hold" && job.Attempt == 1:
			// Stays in flight until the process dies or its lease ends.
			fmt.Println("RUNNING", job.OrderingID, cfg.NodeID)
			<-ctx.Done()
			return ctx.Err()
		case job.Kind == "stubborn":
			// Ignores its context, as a handler stuck in a call might: a
			// frozen node's late outcome must still change nothing.
			fmt.Println("RUNNING", job.OrderingID, cfg.NodeID)
			time.Sleep(time.Second)
			ctx = context.WithoutCancel(ctx)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
		_, err := db.Exec(ctx, "INSERT INTO "+schema+".execlog (ordering_id, uk, node, attempt, started, ended) VALUES ($1, $2, $3, $4, $5, $6)",
			job.OrderingID, job.UniquenessKey, logNode, job.Attempt, start, time.Now())
		if err != nil {
			return err
		}
		if job.Kind == "block-before-commit" {
			fmt.Println("READY-TO-COMMIT", job.OrderingID)
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	txRun := func(ctx context.Context, tx pgx.Tx, job *pgsched.Job) error { return run(ctx, tx, job) }
	cfg.Handlers = map[string]pgsched.Handler{
		"*": pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error { return run(ctx, pool, job) }),
	}
	cfg.TxHandlers = map[string]pgsched.TxHandler{
		"tx":                  pgsched.TxHandlerFunc(txRun),
		"block-before-commit": pgsched.TxHandlerFunc(txRun),
	}
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

type child struct {
	cmd   *exec.Cmd
	node  string
	lines chan string // what the child printed, line by line
	logs  chan string // what it logged (stderr), line by line; also copied to the test's stderr
}

// waitLine waits for a printed line starting with prefix.
func (c *child) waitLine(t *testing.T, prefix string, within time.Duration) string {
	t.Helper()
	within = pgtest.Patience(within)
	deadline := time.After(within)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("child %s exited before printing %q", c.node, prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-deadline:
			t.Fatalf("child %s did not print %q within %s", c.node, prefix, within)
		}
	}
}

// startChild starts a worker process and waits until it has started; env
// adds CHILD_* settings such as CHILD_FLEXDOWN=5s.
func startChild(t *testing.T, db *pgtest.DB, node string, sleep time.Duration, concurrency int, drain time.Duration, env ...string) *child {
	t.Helper()
	c := spawnChild(t, db, node, sleep, concurrency, drain, env...)
	c.waitLine(t, "STARTED", 20*time.Second)
	return c
}

// spawnChild starts a worker process without waiting for it to start.
func spawnChild(t *testing.T, db *pgtest.DB, node string, sleep time.Duration, concurrency int, drain time.Duration, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PGSCHED_TEST_CHILD=worker", "CHILD_URL="+db.URL, "CHILD_SCHEMA="+db.Schema,
		"CHILD_NODE="+node, "CHILD_SLEEP="+sleep.String(), "CHILD_CONCURRENCY="+strconv.Itoa(concurrency),
		"CHILD_DRAIN="+drain.String())
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	errOut, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd, node: node, lines: make(chan string, 10_000), logs: make(chan string, 10_000)}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case c.lines <- sc.Text():
			default: // nobody reads this many lines; drop
			}
		}
	}()
	go func() {
		defer close(c.logs)
		sc := bufio.NewScanner(errOut)
		for sc.Scan() {
			fmt.Fprintln(os.Stderr, sc.Text())
			select {
			case c.logs <- sc.Text():
			default:
			}
		}
	}()
	return c
}

// waitLog waits for a logged line containing s.
func (c *child) waitLog(t *testing.T, s string, within time.Duration) string {
	t.Helper()
	within = pgtest.Patience(within)
	deadline := time.After(within)
	for {
		select {
		case l, ok := <-c.logs:
			if !ok {
				t.Fatalf("child %s exited before logging %q", c.node, s)
			}
			if strings.Contains(l, s) {
				return l
			}
		case <-deadline:
			t.Fatalf("child %s did not log %q within %s", c.node, s, within)
		}
	}
}

func createExecLog(t *testing.T, db *pgtest.DB) {
	t.Helper()
	_, err := db.Pool.Exec(context.Background(), "CREATE TABLE "+db.Schema+".execlog (ordering_id text, uk text, node text, attempt int, started timestamptz, ended timestamptz)")
	require.NoError(t, err)
}

// checkLog asserts per ordering_id: every expected task ran, in order, with
// no two runs overlapping in time; it returns how many tasks ran more than once.
func checkLog(t *testing.T, db *pgtest.DB, ids, perID int) (dups int) {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), "SELECT ordering_id, uk, started, ended FROM "+db.Schema+".execlog ORDER BY ordering_id, started")
	require.NoError(t, err)
	type run struct {
		OrderingID, UK string
		Started, Ended time.Time
	}
	runs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[run])
	require.NoError(t, err)
	byID := map[string][]run{}
	for _, r := range runs {
		byID[r.OrderingID] = append(byID[r.OrderingID], r)
	}
	require.Len(t, byID, ids, "every ordering_id ran")
	for id, rs := range byID {
		seen := map[string]bool{}
		last := ""
		for i, r := range rs {
			if i > 0 {
				require.False(t, r.Started.Before(rs[i-1].Ended), "%s: %s started %s before %s ended %s", id, r.UK, r.Started, rs[i-1].UK, rs[i-1].Ended)
			}
			if seen[r.UK] {
				dups++
				continue
			}
			require.Greater(t, r.UK, last, "%s: %s ran after %s", id, r.UK, last)
			last = r.UK
			seen[r.UK] = true
		}
		require.Len(t, seen, perID, "%s: every task ran", id)
	}
	return dups
}

func scheduleGrid(t *testing.T, b clientBundle, ids, perID int, spread time.Duration, kind string) {
	t.Helper()
	scheduleGridKinds(t, b, ids, perID, spread, func(string, int) string { return kind })
}

// scheduleGridKinds schedules perID tasks for each of ids ordering_ids
// (id-0000, id-0001, ...), task s of each at start + spread*s/perID, with
// the kind kindOf(ordering_id, s).
func scheduleGridKinds(t *testing.T, b clientBundle, ids, perID int, spread time.Duration, kindOf func(id string, s int) string) {
	t.Helper()
	start := time.Now().Add(200 * time.Millisecond)
	tasks := make([]pgsched.Task, 0, ids*perID)
	for s := range perID {
		for i := range ids {
			at := start.Add(spread * time.Duration(s) / time.Duration(perID))
			id := fmt.Sprintf("id-%04d", i)
			tasks = append(tasks, pgsched.Task{OrderingID: id, ScheduledAt: at, UniquenessKey: fmt.Sprintf("%05d", s), Kind: kindOf(id, s)})
		}
	}
	// Where scheduling a batch takes long (Citus: a statement per
	// partition), later batches move later by as much, so none is past the
	// grace window; each ordering_id's times still rise with s.
	var shift time.Duration
	for len(tasks) > 0 {
		n := min(len(tasks), 5000)
		if late := time.Since(tasks[0].ScheduledAt.Add(shift)); late > time.Second {
			shift += late
		}
		batch := slices.Clone(tasks[:n])
		for i := range batch {
			batch[i].ScheduledAt = batch[i].ScheduledAt.Add(shift)
		}
		_, err := b.client.ScheduleMany(context.Background(), batch)
		require.NoError(t, err)
		tasks = tasks[n:]
	}
}

func waitDrained(t *testing.T, b clientBundle, within time.Duration) {
	t.Helper()
	eventually(t, within, func() bool { return countRows(t, b, "tasks") == 0 }, "all tasks done")
}

// TestOrderAcrossProcesses: 3 worker processes, 500 ordering_ids x 40 tasks
// spread over a few seconds; each ordering_id runs in order, without
// overlap, nothing missing, nothing twice.
func TestOrderAcrossProcesses(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	createExecLog(t, b.db)
	for i := range 3 {
		startChild(t, b.db, fmt.Sprint("order-node-", i), 0, 50, 5*time.Second)
	}
	scheduleGrid(t, b, 500, 40, 3*time.Second, "default")
	waitDrained(t, b, 3*time.Minute)
	require.Zero(t, checkLog(t, b.db, 500, 40), "no task ran twice")
}

// TestSigkillLosesNothing: one of three workers is SIGKILLed mid-run; its
// tasks are rescued once its lease expires and every task still runs, in
// order per ordering_id; the only tasks that run twice are those whose
// outcome died with the victim.
func TestSigkillLosesNothing(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	createExecLog(t, b.db)
	var kids []*child
	for i := range 3 {
		kids = append(kids, startChild(t, b.db, fmt.Sprint("kill-node-", i), 5*time.Millisecond, 20, 5*time.Second))
	}
	scheduleGrid(t, b, 200, 20, 2*time.Second, "default")
	eventually(t, 30*time.Second, func() bool {
		var n int
		_ = b.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM "+b.db.Schema+".tasks WHERE state = 'running' AND node_id = 'kill-node-0'").Scan(&n)
		return n >= 3
	}, "the victim runs tasks")
	killed := time.Now()
	require.NoError(t, kids[0].cmd.Process.Signal(syscall.SIGKILL))
	_ = kids[0].cmd.Wait()
	// What the victim held when it died. Nothing of it goes back before
	// the victim's lease runs out (seconds from now), so this is all of it.
	held := runningOn(t, b.db, "kill-node-0")
	require.NotEmpty(t, held, "the victim held tasks when it was killed")
	waitDrained(t, b, 2*time.Minute)
	checkLog(t, b.db, 200, 20)
	checkRerunsFrom(t, b.db, "kill-node-0", killed)
	require.Positive(t, checkRescued(t, b.db, "kill-node-0", held), "the victim's tasks were rescued")
}

// heldTask is a task a node was running.
type heldTask struct {
	OrderingID, UK string
	Attempt        int
}

// runningOn lists the tasks the database says node runs.
func runningOn(t *testing.T, db *pgtest.DB, node string) []heldTask {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(),
		"SELECT ordering_id, uniqueness_key, attempt FROM "+db.Schema+".running WHERE node_id = $1", node)
	require.NoError(t, err)
	held, err := pgx.CollectRows(rows, pgx.RowToStructByPos[heldTask])
	require.NoError(t, err)
	return held
}

// checkRescued asserts that each task held by the dead victim completed:
// on another node as a later attempt (rescued), or, for an outcome the
// victim had sent just before it died, by the victim itself. It returns
// how many were rescued.
func checkRescued(t *testing.T, db *pgtest.DB, victim string, held []heldTask) (rescued int) {
	t.Helper()
	for _, h := range held {
		var node string
		var attempt int
		require.NoError(t, db.Pool.QueryRow(context.Background(),
			"SELECT node_id, attempt FROM "+db.Schema+".completions WHERE ordering_id = $1 AND uniqueness_key = $2",
			h.OrderingID, h.UK).Scan(&node, &attempt), "%s/%s, held by %s, completed", h.OrderingID, h.UK, victim)
		if node == victim {
			require.Equal(t, h.Attempt, attempt, "%s/%s: completed by %s as the attempt it held", h.OrderingID, h.UK, victim)
			continue
		}
		require.Greater(t, attempt, h.Attempt, "%s/%s: run again on %s as a later attempt", h.OrderingID, h.UK, node)
		rescued++
	}
	t.Logf("%d of the %d tasks %s held when it died were rescued and ran elsewhere", rescued, len(held), victim)
	return rescued
}

// TestSigkillBeforeCommit: a transactional handler wrote its row and the
// process dies before commit: neither the row nor the completion exists,
// and the task runs again elsewhere.
func TestSigkillBeforeCommit(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	createExecLog(t, b.db)
	victim := startChild(t, b.db, "tx-victim", 0, 5, time.Second)
	_, err := b.client.Schedule(context.Background(), pgsched.Task{OrderingID: "tx-1", ScheduledAt: time.Now(), Kind: "block-before-commit"})
	require.NoError(t, err)
	// The handler prints this after its write, inside its transaction,
	// and then blocks: the kill comes with the write in flight.
	victim.waitLine(t, "READY-TO-COMMIT tx-1", 20*time.Second)
	require.NoError(t, victim.cmd.Process.Signal(syscall.SIGKILL))
	_ = victim.cmd.Wait()
	require.Equal(t, 0, countRows(t, b, "execlog"), "the uncommitted write is gone")
	require.Equal(t, 0, countRows(t, b, "completions"), "no completion")

	// Another node rescues and runs it again; this kind blocks before commit
	// again, so switch it to a normal run first.
	_, err = b.db.Pool.Exec(context.Background(), "UPDATE "+b.db.Schema+".heads SET kind = 'tx'")
	require.NoError(t, err)
	startChild(t, b.db, "tx-rescuer", 0, 5, time.Second)
	waitDrained(t, b, 30*time.Second)
	require.Equal(t, 1, countRows(t, b, "execlog"))
	require.Equal(t, 1, countRows(t, b, "completions"))
	var attempt int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT attempt FROM "+b.db.Schema+".execlog").Scan(&attempt))
	require.Equal(t, 2, attempt, "the second run")
}

// TestSigtermDrains: SIGTERM lets running tasks finish within the drain
// timeout, gives the rest back and exits; nothing is lost.
func TestSigtermDrains(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	createExecLog(t, b.db)
	c := startChild(t, b.db, "term-node", 300*time.Millisecond, 10, 2*time.Second)
	scheduleGrid(t, b, 30, 5, 0, "default")
	eventually(t, 20*time.Second, func() bool { return countRows(t, b, "execlog") > 0 }, "work started")
	sent := time.Now()
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, c.cmd.Wait(), "clean exit")
	t.Logf("exited %s after SIGTERM (drain timeout 2s)", time.Since(sent).Round(time.Millisecond))
	// It started no more work once told to stop (at most its 10 slots, had
	// they been starting as the signal arrived), where a node that went on
	// until its drain timeout would start dozens.
	var late int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		"SELECT count(*) FROM "+b.db.Schema+".execlog WHERE started > $1", sent).Scan(&late))
	require.LessOrEqual(t, late, 10, "tasks started after SIGTERM")
	var running int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM "+b.db.Schema+".tasks WHERE state = 'running'").Scan(&running))
	require.Zero(t, running, "nothing left claimed by the stopped node")
	require.Equal(t, 0, countRows(t, b, "nodes"), "deregistered")
	startChild(t, b.db, "term-successor", 0, 10, time.Second)
	waitDrained(t, b, 30*time.Second)
	require.Zero(t, checkLog(t, b.db, 30, 5))
}
