package pgsched

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgsched/pgsched/internal/dispatch"
	"github.com/pgsched/pgsched/internal/lease"
	"github.com/pgsched/pgsched/internal/metrics"
	"github.com/pgsched/pgsched/internal/recurring"
	"github.com/pgsched/pgsched/internal/schemaversion"
	"github.com/pgsched/pgsched/internal/stats"
	"github.com/pgsched/pgsched/internal/store"
)

// ErrNoHandler is the failure recorded for a task whose kind has no handler.
var ErrNoHandler = errors.New("pgsched: no handler for kind")

// Worker is one node of the cluster: it holds a lease, claims due tasks from
// its partitions, runs them with the configured handlers and records the
// outcomes. Any number of workers may share a schema.
type Worker struct {
	pool    *pgxpool.Pool // the caller's: transactional handlers run here
	ctl     *pgxpool.Pool // the worker's own control connections
	cfg     WorkerConfig
	kinds   map[string]kindHandler
	store   store.Store
	metrics *metrics.Metrics
	logger  *slog.Logger

	mu        sync.Mutex
	starting  bool               // a Start is in progress
	started   bool               // Start succeeded
	stopStart bool               // Stop came while starting: that Start gives up
	cancel    context.CancelFunc // ends claiming, listening and maintenance
	done      <-chan struct{}    // closed when the run has ended

	node       *lease.Node
	dispatcher *dispatch.Dispatcher
	// outcomesStuck is what logReadiness last logged (maintain's only).
	outcomesStuck bool
	retries       retryLog
	// paused holds the kinds paused cluster-wide, as last read (see
	// refreshPaused); nil before the first read.
	paused atomic.Pointer[map[string]bool]
	// cancels holds the ids of tasks an operator asked to cancel, as last
	// read (see refreshCancels).
	cancels atomic.Pointer[map[int64]bool]
	// stats holds outcomes and lateness until maintain adds them to the
	// throughput history.
	stats stats.Recorder
}

// NodeID is this worker's node id.
func (w *Worker) NodeID() string { return w.cfg.NodeID }

// Ready reports whether the worker holds a live lease and its task
// outcomes are being recorded (see Readiness).
func (w *Worker) Ready() bool { return w.Readiness() == nil }

// Readiness returns nil while the worker holds a live lease and records
// its tasks' outcomes, and otherwise says why not: not started, no live
// lease (the database unreachable, or starting; ErrNodeIDInUse while
// another process holds the node id; ErrFailoverWait after a database
// failover, for one lease TTL), or outcomes that have
// failed to be written for longer than the lease TTL (successful tasks
// would stay "running" while the node looked healthy).
func (w *Worker) Readiness() error {
	w.mu.Lock()
	node, disp := w.node, w.dispatcher
	w.mu.Unlock()
	if node == nil || disp == nil {
		return errors.New("not started")
	}
	if node.Current() == nil {
		if wait := node.Waiting(); wait != nil {
			if wait.Reason == store.WaitFailover {
				return fmt.Errorf("%w: %w", ErrFailoverWait, wait)
			}
			return fmt.Errorf("%w: %w", ErrNodeIDInUse, wait)
		}
		return errors.New("no live lease (database unreachable or starting)")
	}
	if d, n, err := disp.Unrecorded(); d > w.cfg.LeaseTTL {
		return fmt.Errorf("outcomes of %d tasks unrecorded for %s: %w", n, d.Round(time.Millisecond), err)
	}
	return nil
}

// Start checks the schema, registers the node and starts working in the
// background. It returns once the first lease is held. On an error nothing
// is left running and Start may be called again: ErrSchemaNotReady and
// ErrDatabaseUnavailable heal once the database is migrated and reachable.
// Once Start has succeeded, it returns ErrAlreadyStarted.
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	if w.starting || w.started {
		w.mu.Unlock()
		return ErrAlreadyStarted
	}
	w.starting, w.stopStart = true, false
	w.mu.Unlock()
	err := w.start(ctx)
	w.mu.Lock()
	w.starting, w.started = false, err == nil
	w.mu.Unlock()
	return err
}

// start does Start's work; each step undoes what the steps before it
// built when it fails.
func (w *Worker) start(ctx context.Context) error {
	ctl, err := w.openControl(ctx)
	if err != nil {
		return err
	}
	settings, err := w.checkSchema(ctx, ctl)
	if err != nil {
		ctl.Close()
		return err
	}
	p, err := w.build(ctl)
	if err != nil {
		ctl.Close()
		return err
	}
	done, err := w.launch(ctx, ctl, p)
	if err != nil {
		ctl.Close()
		return err
	}
	if err := awaitLease(ctx, p.node, done); err != nil {
		w.undo(done)
		return err
	}
	w.logger.Info("worker started", "partitions", settings.PartitionCount, "concurrency", w.cfg.Concurrency)
	return nil
}

// openControl opens the control plane's pool (lease, claims, outcomes,
// maintenance): a small one of its own, so busy handlers on the caller's
// pool can never starve lease renewal. It connects lazily.
func (w *Worker) openControl(ctx context.Context) (*pgxpool.Pool, error) {
	ctlCfg := w.pool.Config()
	ctlCfg.MaxConns, ctlCfg.MinConns = 4, 1
	// Every control statement is a short index-driven one; JIT compiling
	// costs far more (hundreds of ms) than it could save, and the planner
	// would reach for it whenever its estimates for small or fresh tables
	// run high.
	if ctlCfg.ConnConfig.RuntimeParams == nil {
		ctlCfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	ctlCfg.ConnConfig.RuntimeParams["jit"] = "off"
	ctl, err := pgxpool.NewWithConfig(ctx, ctlCfg)
	if err != nil {
		return nil, fmt.Errorf("pgsched: opening control connections: %w", err)
	}
	return ctl, nil
}

// checkSchema reads the schema's version (refusing one a newer build
// migrated) and the settings, opens the store the schema needs (Citus's,
// on a distributed schema), and prepares completion partitions: the
// first statements to reach the database, so their errors say whether it
// is reachable and migrated.
func (w *Worker) checkSchema(ctx context.Context, ctl *pgxpool.Pool) (store.Settings, error) {
	version, err := w.store.SchemaVersion(ctx, ctl)
	if err != nil {
		return store.Settings{}, startError(err)
	}
	if err := schemaversion.Check(version, "the worker"); err != nil {
		return store.Settings{}, fmt.Errorf("pgsched: %w", err)
	}
	settings, err := w.store.Settings(ctx, ctl)
	if err != nil {
		return settings, startError(err)
	}
	// The store the schema needs: on Citus, claims and outcomes go to the
	// Citus workers.
	if w.store, err = store.Open(ctx, ctl, w.cfg.Schema); err != nil {
		return settings, startError(err)
	}
	if _, err := w.store.EnsureCompletionPartitions(ctx, ctl, 3); err != nil {
		return settings, startError(fmt.Errorf("preparing completion partitions: %w", err))
	}
	for _, r := range w.cfg.Recurring {
		res, err := w.store.RecurringUpsert(ctx, ctl, r.def())
		if err != nil {
			return settings, startError(fmt.Errorf("recurring schedule %q: %w", r.Name, err))
		}
		msg := "recurring schedule upserted"
		if res == string(Inserted) {
			msg = "recurring schedule created"
		}
		w.logger.Info(msg, "schedule", r.Name, "spec", r.Spec, "time_zone", r.TimeZone, "kind", r.Kind, "missed", r.Missed)
	}
	return settings, nil
}

// parts are the components of one run of the worker.
type parts struct {
	node                         *lease.Node
	duties                       *lease.Duties
	leader                       *lease.Leader
	disp                         *dispatch.Dispatcher
	wake, dutiesWake, leaderWake chan struct{}
	pauseWake, cancelWake        chan struct{}
}

// build makes the run's components on ctl. It starts nothing.
func (w *Worker) build(ctl *pgxpool.Pool) (*parts, error) {
	p := &parts{wake: make(chan struct{}, 1), dutiesWake: make(chan struct{}, 1), leaderWake: make(chan struct{}, 1),
		pauseWake: make(chan struct{}, 1), cancelWake: make(chan struct{}, 1)}
	host, _ := os.Hostname()
	var err error
	p.node, err = lease.NewNode(lease.NodeConfig{
		ID: w.cfg.NodeID, Store: w.store, DB: ctl, TTL: w.cfg.LeaseTTL, Host: host, PID: os.Getpid(),
		Logger: w.logger,
		Events: lease.Events{
			Registered: func(epoch int64) { w.metrics.LeaseEpoch.Set(float64(epoch)) },
			Renewed:    func() { w.metrics.LeaseRenewed.Inc() },
			Lost: func(int64, string) {
				w.metrics.LeaseLost.Inc()
				w.metrics.LeaseEpoch.Set(0)
			},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("pgsched: %w", err)
	}
	p.duties, err = lease.NewDuties(lease.DutiesConfig{
		Node: p.node, Store: w.store, DB: ctl, Interval: w.cfg.ClusterInterval, Wake: p.dutiesWake,
		OnChange: func() { poke(p.wake) },
		OnRescue: func(n int) { w.metrics.Rescued.Add(float64(n)) },
		OnState: func(s lease.DutiesState) {
			w.metrics.Partitions.Set(float64(s.Owned))
			w.metrics.PartitionsServed.Set(float64(s.Served))
			w.metrics.StandInsActive.Set(float64(len(s.StandIns)))
			w.metrics.BackupAssignments.Set(float64(s.BackupOf))
		},
		Logger: w.logger,
	})
	if err != nil {
		return nil, fmt.Errorf("pgsched: %w", err)
	}
	planner, err := lease.NewPlanner(lease.PlannerConfig{
		Store: w.store, DB: ctl, FlexDown: w.cfg.FlexDown, Logger: w.logger,
		Events: lease.PlanEvents{
			Depleted: func(nodes []string) { w.metrics.NodesDepleted.Add(float64(len(nodes))) },
			Rescued:  func(n int) { w.metrics.Rescued.Add(float64(n)) },
		},
	})
	if err != nil {
		return nil, fmt.Errorf("pgsched: %w", err)
	}
	// Two lease TTLs ahead: a leader's death and its successor's election
	// fit in that, so a failover makes no tick late, let alone missed.
	ticks := &recurring.Materializer{Store: w.store, DB: ctl, Horizon: max(2*w.cfg.LeaseTTL, 2*time.Second), Logger: w.logger,
		Events: recurring.Events{
			Created: func(n, catchUps int) {
				w.metrics.RecurringTicks.WithLabelValues("on_time").Add(float64(n - catchUps))
				w.metrics.RecurringTicks.WithLabelValues("catch_up").Add(float64(catchUps))
			},
			Skipped: func(n int) { w.metrics.RecurringTicks.WithLabelValues("skipped").Add(float64(n)) },
		}}
	p.leader, err = lease.NewLeader(lease.LeaderConfig{
		Node: p.node, Store: w.store, DB: ctl, TTL: w.cfg.LeaseTTL, Interval: w.cfg.ClusterInterval, Wake: p.leaderWake,
		Round: func(ctx context.Context, l lease.Leadership) {
			planner.Round(ctx, l)
			if err := ticks.Round(ctx); err != nil && ctx.Err() == nil {
				w.logger.Warn("creating recurring ticks failed; the next round tries again", "error", err)
			}
		},
		Logger: w.logger,
		Events: lease.LeaderEvents{
			Won: func(int64) {
				w.metrics.LeaderCurrent.Set(1)
				w.metrics.LeaderClaimed.Inc()
			},
			Refreshed: func(int64) { w.metrics.LeaderRefreshed.Inc() },
			Lost:      func(int64, string) { w.metrics.LeaderCurrent.Set(0) },
		},
	})
	if err != nil {
		return nil, fmt.Errorf("pgsched: %w", err)
	}
	p.disp, err = dispatch.New(dispatch.Config{
		Store: w.store, DB: ctl, Node: p.node,
		Partitions:   p.duties.Partitions,
		Concurrency:  w.cfg.Concurrency,
		Prefetch:     w.cfg.Prefetch,
		Exec:         w.exec,
		Paused:       w.isPaused,
		Cancelled:    w.isCancelled,
		Wake:         p.wake,
		PollInterval: w.cfg.PollInterval,
		ClaimAhead:   w.cfg.ClaimAhead,
		FinishBatch:  w.cfg.FinishBatch,
		FinishDelay:  w.cfg.FinishDelay,
		DrainTimeout: w.cfg.DrainTimeout,
		Logger:       w.logger,
		Hooks: dispatch.Hooks{
			Claimed:    w.onClaimed,
			Finished:   w.onFinished,
			Reconciled: func(n int) { w.metrics.Reconciled.Add(float64(n)) },
		},
	})
	if err != nil {
		return nil, fmt.Errorf("pgsched: %w", err)
	}
	return p, nil
}

// launch publishes p as the worker's run and starts its goroutines. The
// returned channel is closed once they have all ended and ctl is closed.
// It refuses, starting nothing, when Stop came while starting.
func (w *Worker) launch(ctx context.Context, ctl *pgxpool.Pool, p *parts) (<-chan struct{}, error) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	nodeCtx, nodeStop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	w.mu.Lock()
	if w.stopStart {
		w.mu.Unlock()
		cancel()
		nodeStop()
		return nil, errStoppedWhileStarting
	}
	w.ctl, w.node, w.dispatcher, w.cancel, w.done = ctl, p.node, p.disp, cancel, done
	w.mu.Unlock()

	var wg sync.WaitGroup
	nodeDone := make(chan struct{})
	go func() { defer close(nodeDone); _ = p.node.Run(nodeCtx) }()
	wg.Add(6)
	go func() { defer wg.Done(); _ = p.leader.Run(runCtx) }()
	go func() { defer wg.Done(); _ = p.duties.Run(runCtx) }()
	go func() {
		defer wg.Done()
		w.listen(runCtx, p.wake, p.dutiesWake, p.leaderWake, p.pauseWake, p.cancelWake)
	}()
	go func() { defer wg.Done(); w.maintain(runCtx, p.pauseWake, p.cancelWake, p.disp) }()
	go func() {
		defer wg.Done()
		counter := &stats.Counter{Store: w.store, DB: ctl, Interval: w.cfg.CountInterval, Logger: w.logger}
		counter.Run(runCtx, func() bool { return p.leader.Current().Term != 0 })
	}()
	go func() { defer wg.Done(); _ = p.disp.Run(runCtx) }()
	go func() {
		wg.Wait()
		// What the drain finished goes into the history too.
		fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
		if err := w.stats.Flush(fctx, w.store, ctl, w.cfg.NodeID); err != nil {
			w.logger.Warn("adding the last outcomes to the throughput history failed", "error", err)
		}
		fcancel()
		// The lease ends last: outcomes of draining tasks need its term.
		nodeStop()
		<-nodeDone
		ctl.Close()
		close(done)
	}()
	return done, nil
}

// awaitLease waits for the node's first lease, for ctx to end or for Stop
// to end the run (done).
func awaitLease(ctx context.Context, node *lease.Node, done <-chan struct{}) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for node.Current() == nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			return errStoppedWhileStarting
		case <-node.Changed():
		case <-tick.C:
		}
	}
	return nil
}

// undo ends a run that did not finish starting and forgets it, leaving the
// worker as before Start.
func (w *Worker) undo(done <-chan struct{}) {
	w.mu.Lock()
	cancel := w.cancel
	w.mu.Unlock()
	cancel()
	<-done
	w.mu.Lock()
	w.ctl, w.node, w.dispatcher, w.cancel, w.done = nil, nil, nil, nil, nil
	w.mu.Unlock()
}

// Stop claims nothing more, waits for running tasks (up to DrainTimeout),
// gives back the rest, records every outcome and deregisters the node so
// others take over at once. Safe to call twice, without Start and after a
// failed Start; a Start still in progress gives up and returns an error.
// If ctx ends first, Stop returns its error while the shutdown goes on.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	w.stopStart = w.starting
	if w.done == nil {
		w.mu.Unlock()
		return nil
	}
	cancel, done, node := w.cancel, w.done, w.node
	w.mu.Unlock()
	// Hand the partitions over before draining, not after: the backup and
	// the leader take them at once while running tasks finish here.
	lctx, lcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	if err := node.Leave(lctx); err != nil {
		w.logger.Warn("announcing the leave failed; partitions move when the node deregisters", "error", err)
	}
	lcancel()
	cancel()
	select {
	case <-done:
		w.logger.Info("worker stopped")
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
