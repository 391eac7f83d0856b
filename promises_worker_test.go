package pgsched_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
)

// runOrder records, in order, the runs a test's handlers saw.
type runOrder struct {
	mu   sync.Mutex
	runs []string
}

func (l *runOrder) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs = append(l.runs, s)
}

func (l *runOrder) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.runs...)
}

// gate holds handlers until it opens. Tests open it with t.Cleanup once
// their workers run, so a failing test does not leave a worker's Stop
// waiting for a handler that ignores its context.
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func newGate() *gate { return &gate{ch: make(chan struct{})} }

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

// receive waits for a value from ch, failing the test after within.
func receive[T any](t *testing.T, ch <-chan T, within time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(pgtest.Patience(within)):
		t.Fatalf("not within %s: %s", pgtest.Patience(within), what)
		panic("unreachable")
	}
}

// TestEqualTimesKeepEnqueueOrderAfterRetry: two tasks enqueued one after
// the other with the same scheduled_at run in enqueue order, also when
// they were queued behind a running task of a later time that then fails:
// the retried task goes back behind them, and the first enqueued of the
// two runs first (their uniqueness keys sort the other way, so an order
// by key would show).
func TestEqualTimesKeepEnqueueOrderAfterRetry(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	// Room to enqueue tasks a second before the running one, however slow
	// the machine.
	_, err := b.db.Pool.Exec(ctx, "SELECT * FROM "+b.db.Schema+".configure(grace => '1 hour')")
	require.NoError(t, err)
	var log runOrder
	started := make(chan struct{}, 1)
	release := newGate()
	cfg := fastConfig(b.db.Schema)
	cfg.Handlers = map[string]pgsched.Handler{
		"first-fails": pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error {
			log.add(fmt.Sprintf("%s#%d", job.UniquenessKey, job.Attempt))
			if job.Attempt == 1 {
				started <- struct{}{}
				<-release.ch
				return errors.New("fails once")
			}
			return nil
		}),
		"*": pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error {
			log.add(fmt.Sprintf("%s#%d", job.UniquenessKey, job.Attempt))
			return nil
		}),
	}
	cfg.KindRetry = map[string]pgsched.RetryPolicy{"first-fails": {MinBackoff: 10 * time.Millisecond, Jitter: -1}}
	outcomes := watchOutcomes(&cfg)
	startWorker(t, b.db, cfg)
	t.Cleanup(release.open)

	at := time.Now()
	_, err = b.client.Schedule(ctx, pgsched.Task{OrderingID: "ties", ScheduledAt: at, UniquenessKey: "running", Kind: "first-fails"})
	require.NoError(t, err)
	receive(t, started, 10*time.Second, "the first task starts")
	earlier := at.Add(-time.Second)
	for _, uk := range []string{"z-enqueued-first", "a-enqueued-second"} {
		_, err = b.client.Schedule(ctx, pgsched.Task{OrderingID: "ties", ScheduledAt: earlier, UniquenessKey: uk})
		require.NoError(t, err)
	}
	release.open()
	outcomes.completed(t, 3, 10*time.Second)
	require.Equal(t, []string{"running#1", "z-enqueued-first#1", "a-enqueued-second#1", "running#2"}, log.list(),
		"by (scheduled_at, enqueue order), the retried task behind the two earlier ones")
}

// TestTxHandlerCompletionCommitsWithItsWrites: a transactional handler's
// writes and its task's completion commit together or not at all. Here
// the first run's write breaks a deferred constraint, so its COMMIT fails:
// the completion must go with it, and the task run again; the second run
// commits both.
func TestTxHandlerCompletionCommitsWithItsWrites(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	s := b.db.Schema
	_, err := b.db.Pool.Exec(ctx, "CREATE TABLE "+s+".effects (id text, CONSTRAINT effects_once UNIQUE (id) DEFERRABLE INITIALLY DEFERRED)")
	require.NoError(t, err)
	_, err = b.db.Pool.Exec(ctx, "INSERT INTO "+s+".effects VALUES ('taken')")
	require.NoError(t, err)
	cfg := fastConfig(b.db.Schema)
	cfg.TxHandlers = map[string]pgsched.TxHandler{"*": pgsched.TxHandlerFunc(func(ctx context.Context, tx pgx.Tx, job *pgsched.Job) error {
		id := "taken" // checked at COMMIT only
		if job.Attempt > 1 {
			id = fmt.Sprint("run-", job.Attempt)
		}
		_, err := tx.Exec(ctx, "INSERT INTO "+s+".effects VALUES ($1)", id)
		return err
	})}
	outcomes := watchOutcomes(&cfg)
	startWorker(t, b.db, cfg)
	_, err = b.client.Schedule(ctx, pgsched.Task{OrderingID: "atomic", ScheduledAt: time.Now()})
	require.NoError(t, err)
	outcomes.completed(t, 1, 10*time.Second)

	require.Equal(t, 1, outcomes.count("retry"), "the run whose commit failed is retried")
	var attempt int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT attempt FROM "+s+".completions WHERE ordering_id = 'atomic'").Scan(&attempt))
	require.Equal(t, 2, attempt, "completed by the run whose writes committed")
	rows, err := b.db.Pool.Query(ctx, "SELECT id FROM "+s+".effects ORDER BY id")
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"run-2", "taken"}, ids)
}

// TestTxHandlerCommitsNothingForALostClaim: when the claim a transactional
// handler runs under is gone before it returns (a stand-in gave the task
// back, the task was claimed again), its transaction rolls back: the
// handler's writes do not commit beside those of the run that completes
// the task.
func TestTxHandlerCommitsNothingForALostClaim(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	s := b.db.Schema
	_, err := b.db.Pool.Exec(ctx, "CREATE TABLE "+s+".effects (id text)")
	require.NoError(t, err)
	started := make(chan struct{}, 1)
	release := newGate()
	cfg := fastConfig(b.db.Schema)
	cfg.TxHandlers = map[string]pgsched.TxHandler{"*": pgsched.TxHandlerFunc(func(ctx context.Context, tx pgx.Tx, job *pgsched.Job) error {
		if _, err := tx.Exec(ctx, "INSERT INTO "+s+".effects VALUES ($1)", fmt.Sprint("run-", job.Attempt)); err != nil {
			return err
		}
		if job.Attempt == 1 {
			started <- struct{}{}
			<-release.ch
		}
		return nil
	})}
	outcomes := watchOutcomes(&cfg)
	startWorker(t, b.db, cfg)
	t.Cleanup(release.open)
	_, err = b.client.Schedule(ctx, pgsched.Task{OrderingID: "lost", ScheduledAt: time.Now()})
	require.NoError(t, err)
	receive(t, started, 10*time.Second, "the first run starts")

	// The claim is given back, as a stand-in's rescue does (rescue_expired
	// writes the same), while the node's term lasts; the node claims the
	// task again, and that run waits behind the first in its ordering_id.
	_, err = b.db.Pool.Exec(ctx, "UPDATE "+s+".heads SET running = false, node_id = NULL, epoch = NULL, claimed_at = NULL, chain = 0 "+
		"WHERE ordering_id = 'lost' AND running")
	require.NoError(t, err)
	eventually(t, 10*time.Second, func() bool {
		var attempt int
		err := b.db.Pool.QueryRow(ctx, "SELECT attempt FROM "+s+".tasks WHERE ordering_id = 'lost' AND state = 'running'").Scan(&attempt)
		return err == nil && attempt == 2
	}, "claimed again")
	release.open()
	outcomes.completed(t, 1, 10*time.Second)

	rows, err := b.db.Pool.Query(ctx, "SELECT id FROM "+s+".effects ORDER BY id")
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"run-2"}, ids, "the first run's write rolled back with its fenced completion")
	var attempt int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT attempt FROM "+s+".completions WHERE ordering_id = 'lost'").Scan(&attempt))
	require.Equal(t, 2, attempt)
}

// TestEarlierTermsTasksGivenBackOnRegister: a node that lost its lease
// (here its row was deleted, as the leader's depletion of a node it took
// for gone does) registers again under a new epoch and gives back at once
// what its earlier term still held (here a handler that ignores its
// cancelled context): the new epoch fences those tasks, and no stand-in
// serves a node whose lease is live, so they would otherwise wait for the
// leader's sweep for orphans, once a minute. The task is claimed again;
// the stuck run's late outcome changes nothing, and the task completes
// once, by its second run.
func TestEarlierTermsTasksGivenBackOnRegister(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	s := b.db.Schema
	cfg := fastConfig(s)
	cfg.NodeID = "rereg-node"
	started := make(chan struct{}, 1)
	release := newGate()
	var log runOrder
	cfg.Handlers = map[string]pgsched.Handler{"*": pgsched.HandlerFunc(func(_ context.Context, job *pgsched.Job) error {
		log.add(fmt.Sprint("attempt ", job.Attempt))
		if job.Attempt == 1 {
			started <- struct{}{}
			<-release.ch // stuck in a call that ignores the context
		}
		return nil
	})}
	outcomes := watchOutcomes(&cfg)
	startWorker(t, b.db, cfg)
	t.Cleanup(release.open)
	_, err := b.client.Schedule(ctx, pgsched.Task{OrderingID: "stuck", ScheduledAt: time.Now()})
	require.NoError(t, err)
	receive(t, started, 10*time.Second, "the task starts")
	var old int64
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT epoch FROM "+s+".tasks WHERE ordering_id = 'stuck' AND state = 'running'").Scan(&old))

	lost := time.Now()
	_, err = b.db.Pool.Exec(ctx, "DELETE FROM "+s+".nodes WHERE node_id = 'rereg-node'")
	require.NoError(t, err)
	// Far below the leader's sweep for orphans (a minute); the node
	// registers again within a renewal interval and a back-off.
	eventually(t, 20*time.Second, func() bool {
		var epoch *int64
		var held int
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT (SELECT epoch FROM "+s+".nodes WHERE node_id = 'rereg-node'), "+
			"(SELECT count(*) FROM "+s+".tasks WHERE ordering_id = 'stuck' AND state = 'running' AND epoch = $1)", old).Scan(&epoch, &held))
		return epoch != nil && *epoch > old && held == 0
	}, "registered again, the node gives back the task its earlier term held")
	t.Logf("the earlier term's task was given back %s after the lease was lost", time.Since(lost).Round(time.Millisecond))
	release.open()
	outcomes.completed(t, 1, 10*time.Second)
	var attempt int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT attempt FROM "+s+".completions WHERE ordering_id = 'stuck'").Scan(&attempt))
	require.Equal(t, 2, attempt, "completed by the run under the new term")
	require.Equal(t, []string{"attempt 1", "attempt 2"}, log.list())
}

// TestLeavingNodeKeepsItsRunningTasks: a node stopping cleanly hands its
// partitions to its backup at once but drains its running tasks itself,
// under its lease. The backup, serving those partitions, must not give
// them back meanwhile: that would run the task a second time while the
// first run goes on (two runs of one ordering_id at once). Here the
// backup runs new tasks of the leaving node's partitions (so it has taken
// them over) while the leaving node's task still runs there, untouched,
// and completes once, on the leaving node.
func TestLeavingNodeKeepsItsRunningTasks(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	s := b.db.Schema
	var runs runOrder
	started := make(chan struct{}, 1)
	release := newGate()
	start := func(node string) *pgsched.Worker {
		cfg := fastConfig(s)
		cfg.NodeID = node
		cfg.DrainTimeout = pgtest.Patience(time.Minute)
		cfg.Handlers = map[string]pgsched.Handler{"*": pgsched.HandlerFunc(func(_ context.Context, job *pgsched.Job) error {
			runs.add(fmt.Sprintf("%s %s#%d", node, job.OrderingID, job.Attempt))
			if job.Kind == "long" && job.Attempt == 1 {
				started <- struct{}{}
				<-release.ch
			}
			return nil
		})}
		return startWorker(t, b.db, cfg)
	}
	leaving := start("leave-a")
	start("leave-b")
	t.Cleanup(release.open)
	rows := waitSettled(t, b.db, []string{"leave-a", "leave-b"})
	a, _ := row(rows, "leave-a")
	var ids []string
	for i := 0; len(ids) < 2; i++ {
		if id := fmt.Sprintf("id-%04d", i); slices.Contains(a.Partitions, int32(pgsched.Partition(id, 8))) {
			ids = append(ids, id)
		}
	}
	longID, probeID := ids[0], ids[1]
	_, err := b.client.Schedule(ctx, pgsched.Task{OrderingID: longID, ScheduledAt: time.Now(), Kind: "long"})
	require.NoError(t, err)
	receive(t, started, 10*time.Second, "leave-a runs the long task")

	stopped := make(chan error, 1)
	go func() { stopped <- leaving.Stop(ctx) }()
	eventually(t, 10*time.Second, func() bool {
		served := servedBy(t, b.db)
		for _, p := range a.Partitions {
			if served[p] != "leave-b" {
				return false
			}
		}
		return true
	}, "leave-b serves leave-a's partitions")
	// A task in those partitions runs on leave-b: it has taken them over,
	// in the very refresh that would give leave-a's tasks back.
	_, err = b.client.Schedule(ctx, pgsched.Task{OrderingID: probeID, ScheduledAt: time.Now()})
	require.NoError(t, err)
	eventually(t, 10*time.Second, func() bool { return slices.Contains(runs.list(), "leave-b "+probeID+"#1") },
		"leave-b runs a new task of leave-a's partitions")

	var state, node string
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT state, node_id FROM "+s+".tasks WHERE ordering_id = $1", longID).Scan(&state, &node))
	require.Equal(t, "running", state, "the draining node's task is still running")
	require.Equal(t, "leave-a", node, "on the draining node")
	release.open()
	require.NoError(t, receive(t, stopped, 30*time.Second, "leave-a stops once its task is done"))

	var attempt int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT node_id, attempt FROM "+s+".completions WHERE ordering_id = $1", longID).Scan(&node, &attempt))
	require.Equal(t, "leave-a", node)
	require.Equal(t, 1, attempt)
	for _, r := range runs.list() {
		if strings.Contains(r, longID) {
			require.Equal(t, "leave-a "+longID+"#1", r, "the long task ran once, on the leaving node")
		}
	}
}

// TestLeaseDeadlineCountsFromTheSend: a node's own lease deadline is the
// time it sent the registration or renewal that set it plus the TTL,
// never later than the expiry the database recorded (from the statement's
// start), so a node holds itself fenced by the time the database lets a
// stand-in take its work. Here a trigger makes every registration and
// renewal of the node take 800ms, and then makes renewals hang: past the
// database's expiry, CheckFence on a running handler's context fails at
// every look, for the term whose last renewal was slow and for the next
// term, whose registration was. A deadline counted from the response
// would leave the node taking itself for live for 800ms longer.
func TestLeaseDeadlineCountsFromTheSend(t *testing.T) {
	t.Parallel()
	if pgtest.Citus() {
		t.Skip("slows renewals with a trigger on the nodes table, a reference table on Citus")
	}
	b := setupClient(t)
	ctx := context.Background()
	s := b.db.Schema
	const node, slow = "slow-renew", 800 * time.Millisecond
	cfg := fastConfig(s)
	cfg.NodeID = node
	cfg.LeaseTTL = 3 * time.Second // renewed every second, so a renewal of 800ms ends before the next
	cfg.ClusterInterval = 250 * time.Millisecond
	handlerCtx := make(chan context.Context, 2)
	release := newGate()
	cfg.Handlers = map[string]pgsched.Handler{"*": pgsched.HandlerFunc(func(hctx context.Context, _ *pgsched.Job) error {
		handlerCtx <- hctx
		<-release.ch
		return nil
	})}
	startWorker(t, b.db, cfg)
	t.Cleanup(release.open)
	_, err := b.client.Schedule(ctx, pgsched.Task{OrderingID: "first-term", ScheduledAt: time.Now()})
	require.NoError(t, err)
	first := receive(t, handlerCtx, 10*time.Second, "the handler starts")
	require.NoError(t, pgsched.CheckFence(first), "live while renewals go through")

	// Every write of the node's row takes 800ms; renewals (the epoch
	// stays) hang once renewals_fail is set, until the node gives up on
	// them at its own deadline. Hang, not fail: a renewal refused at once
	// is retried every third of the TTL, and the third retry comes as the
	// lease runs out in the database, finds it expired, and ends the term
	// within milliseconds of the expiry, whatever deadline the node kept;
	// the looks below would then miss a node counting from the response.
	_, err = b.db.Pool.Exec(ctx, fmt.Sprintf(`
		CREATE TABLE %[1]s.renewals_fail (fail boolean NOT NULL);
		INSERT INTO %[1]s.renewals_fail VALUES (false);
		CREATE FUNCTION %[1]s.slow_renewal() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.epoch = OLD.epoch AND (SELECT fail FROM %[1]s.renewals_fail) THEN
				PERFORM pg_sleep(60);
			END IF;
			PERFORM pg_sleep(%[2]f);
			RETURN NEW;
		END $$;
		CREATE TRIGGER slow_renewal BEFORE UPDATE ON %[1]s.nodes FOR EACH ROW WHEN (NEW.node_id = '%[3]s')
		EXECUTE FUNCTION %[1]s.slow_renewal()`, s, slow.Seconds(), node))
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = b.db.Pool.Exec(context.Background(), "DROP TRIGGER IF EXISTS slow_renewal ON "+s+".nodes")
	})
	var installed time.Time
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT now()").Scan(&installed))
	eventually(t, 10*time.Second, func() bool {
		var renewed time.Time
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT renewed_at FROM "+s+".nodes WHERE node_id = $1", node).Scan(&renewed))
		return renewed.After(installed)
	}, "a slow renewal went through")
	_, err = b.db.Pool.Exec(ctx, "UPDATE "+s+".renewals_fail SET fail = true")
	require.NoError(t, err)

	// fenced looks at hctx from the database's expiry of epoch's lease
	// until longer than a slow write after it: the node must take itself
	// for fenced at every look. The expiry is read again before each look
	// (a renewal under way when renewals began to fail may still land).
	fenced := func(hctx context.Context, epoch int64) {
		t.Helper()
		looks := 0
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		var expires *time.Time
		for {
			// Once the node registers again, the term's row is gone and its
			// last expiry stands.
			err := b.db.Pool.QueryRow(ctx, "SELECT lease_expires_at FROM "+s+".nodes WHERE node_id = $1 AND epoch = $2", node, epoch).
				Scan(&expires)
			if !errors.Is(err, pgx.ErrNoRows) {
				require.NoError(t, err)
			}
			require.NotNil(t, expires, "epoch %d is registered", epoch)
			now := time.Now()
			if now.After(expires.Add(slow + 200*time.Millisecond)) {
				break
			}
			err = pgsched.CheckFence(hctx)
			if now.After(*expires) {
				looks++
				require.ErrorIs(t, err, pgsched.ErrLeaseExpired, "epoch %d: %s after the database's expiry of the lease, the node still took itself for live",
					epoch, now.Sub(*expires).Round(time.Millisecond))
			}
			<-tick.C
		}
		require.Positive(t, looks)
	}
	var epoch1 int64
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT epoch FROM "+s+".tasks WHERE ordering_id = 'first-term'").Scan(&epoch1))
	fenced(first, epoch1)

	// The next term: registered (slowly, as the trigger lets registrations
	// through), it claims a new task, and its renewals fail too.
	receive(t, first.Done(), 10*time.Second, "the first term ends")
	_, err = b.client.Schedule(ctx, pgsched.Task{OrderingID: "second-term", ScheduledAt: time.Now()})
	require.NoError(t, err)
	second := receive(t, handlerCtx, 20*time.Second, "the next term runs the new task")
	var epoch2 int64
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT epoch FROM "+s+".tasks WHERE ordering_id = 'second-term'").Scan(&epoch2))
	require.Greater(t, epoch2, epoch1)
	fenced(second, epoch2)
}
