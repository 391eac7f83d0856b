package pgsched

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgsched/pgsched/internal/dispatch"
	"github.com/pgsched/pgsched/internal/lease"
	"github.com/pgsched/pgsched/internal/metrics"
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
	cfg     Config
	store   *store.Store
	metrics *metrics.Metrics
	logger  *slog.Logger

	mu       sync.Mutex
	started  bool
	stopped  bool
	cancel   context.CancelFunc // ends claiming, listening and maintenance
	nodeStop context.CancelFunc // ends the lease, after the drain
	done     chan struct{}

	node       *lease.Node
	dispatcher *dispatch.Dispatcher
	// outcomesStuck is what logReadiness last logged (maintain's only).
	outcomesStuck bool
}

// NewWorker validates cfg and returns a Worker; Start runs it.
func NewWorker(pool *pgxpool.Pool, cfg Config) (*Worker, error) {
	if pool == nil {
		return nil, errors.New("pgsched: NewWorker needs a pool")
	}
	st, err := store.New(cfg.Schema)
	if err != nil {
		return nil, fmt.Errorf("pgsched: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NodeID == "" {
		host, _ := os.Hostname()
		cfg.NodeID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 100
	}
	if cfg.Concurrency < 0 {
		return nil, fmt.Errorf("pgsched: Concurrency must be positive, got %d", cfg.Concurrency)
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = 10 * time.Second
	}
	if cfg.MaintenanceInterval <= 0 {
		cfg.MaintenanceInterval = cfg.LeaseTTL / 4
	}
	if cfg.FlexDown <= 0 {
		cfg.FlexDown = time.Minute
	}
	switch {
	case cfg.ClaimAhead == 0:
		cfg.ClaimAhead = 25 * time.Millisecond
	case cfg.ClaimAhead < 0:
		cfg.ClaimAhead = 0
	case cfg.ClaimAhead > time.Second:
		return nil, fmt.Errorf("pgsched: ClaimAhead must be at most 1s, got %s", cfg.ClaimAhead)
	}
	if cfg.ClusterInterval <= 0 {
		cfg.ClusterInterval = min(cfg.LeaseTTL/3, time.Second)
	}
	for kind, h := range cfg.Handlers {
		if (h.Func == nil) == (h.TxFunc == nil) {
			return nil, fmt.Errorf("pgsched: handler for kind %q must set exactly one of Func and TxFunc", kind)
		}
	}
	m, err := metrics.New(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("pgsched: registering metrics: %w", err)
	}
	return &Worker{pool: pool, cfg: cfg, store: st, metrics: m, logger: cfg.Logger.With("node_id", cfg.NodeID)}, nil
}

// NodeID is this worker's node id.
func (w *Worker) NodeID() string { return w.cfg.NodeID }

// Ready reports whether the worker holds a live lease and its task
// outcomes are being recorded (see Readiness).
func (w *Worker) Ready() bool { return w.Readiness() == nil }

// Readiness returns nil while the worker holds a live lease and records
// its tasks' outcomes, and otherwise says why not: not started, no live
// lease (the database unreachable, or starting), or outcomes that have
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
		return errors.New("no live lease (database unreachable or starting)")
	}
	if d, n, err := disp.Unrecorded(); d > w.cfg.LeaseTTL {
		return fmt.Errorf("outcomes of %d tasks unrecorded for %s: %w", n, d.Round(time.Millisecond), err)
	}
	return nil
}

// Start checks the schema, registers the node and starts working in the
// background. It returns once the first lease is held (or ctx ends).
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return errors.New("pgsched: worker already started")
	}
	w.started = true
	w.mu.Unlock()
	var err error

	// The control plane (lease, claims, outcomes, maintenance) gets a small
	// pool of its own, so busy handlers on the caller's pool can never starve
	// lease renewal.
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
	w.ctl, err = pgxpool.NewWithConfig(ctx, ctlCfg)
	if err != nil {
		return fmt.Errorf("pgsched: opening control connections: %w", err)
	}
	started := false
	defer func() {
		if !started {
			w.ctl.Close()
		}
	}()
	settings, err := w.store.Settings(ctx, w.ctl)
	if err != nil {
		return fmt.Errorf("pgsched: %w", err)
	}
	if _, err := w.store.EnsureCompletionPartitions(ctx, w.ctl, 3); err != nil {
		return fmt.Errorf("pgsched: preparing completion partitions: %w", err)
	}

	host, _ := os.Hostname()
	node, err := lease.NewNode(lease.NodeConfig{
		ID: w.cfg.NodeID, Store: w.store, DB: w.ctl, TTL: w.cfg.LeaseTTL, Host: host, PID: os.Getpid(),
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
		return fmt.Errorf("pgsched: %w", err)
	}
	wake := make(chan struct{}, 1)
	dutiesWake := make(chan struct{}, 1)
	leaderWake := make(chan struct{}, 1)
	duties, err := lease.NewDuties(lease.DutiesConfig{
		Node: node, Store: w.store, DB: w.ctl, Interval: w.cfg.ClusterInterval, Wake: dutiesWake,
		OnChange: func() { poke(wake) },
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
		return fmt.Errorf("pgsched: %w", err)
	}
	planner, err := lease.NewPlanner(lease.PlannerConfig{
		Store: w.store, DB: w.ctl, FlexDown: w.cfg.FlexDown, Logger: w.logger,
		Events: lease.PlanEvents{
			Depleted: func(nodes []string) { w.metrics.NodesDepleted.Add(float64(len(nodes))) },
			Rescued:  func(n int) { w.metrics.Rescued.Add(float64(n)) },
		},
	})
	if err != nil {
		return fmt.Errorf("pgsched: %w", err)
	}
	leader, err := lease.NewLeader(lease.LeaderConfig{
		Node: node, Store: w.store, DB: w.ctl, TTL: w.cfg.LeaseTTL, Interval: w.cfg.ClusterInterval, Wake: leaderWake,
		Round: planner.Round, Logger: w.logger,
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
		return fmt.Errorf("pgsched: %w", err)
	}
	disp, err := dispatch.New(dispatch.Config{
		Store: w.store, DB: w.ctl, Node: node,
		Partitions:   duties.Partitions,
		Concurrency:  w.cfg.Concurrency,
		Prefetch:     w.cfg.Prefetch,
		Exec:         w.exec,
		Wake:         wake,
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
		return fmt.Errorf("pgsched: %w", err)
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	nodeCtx, nodeStop := context.WithCancel(context.WithoutCancel(ctx))
	w.mu.Lock()
	w.node, w.dispatcher, w.cancel, w.nodeStop = node, disp, cancel, nodeStop
	w.done = make(chan struct{})
	w.mu.Unlock()

	var wg sync.WaitGroup
	nodeDone := make(chan struct{})
	go func() { defer close(nodeDone); _ = node.Run(nodeCtx) }()
	wg.Add(5)
	go func() { defer wg.Done(); _ = leader.Run(runCtx) }()
	go func() { defer wg.Done(); _ = duties.Run(runCtx) }()
	go func() { defer wg.Done(); w.listen(runCtx, wake, dutiesWake, leaderWake) }()
	go func() { defer wg.Done(); w.maintain(runCtx) }()
	go func() { defer wg.Done(); _ = disp.Run(runCtx) }()
	go func() {
		wg.Wait()
		nodeStop()
		<-nodeDone
		w.ctl.Close()
		close(w.done)
	}()
	started = true

	for node.Current() == nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-node.Changed():
		case <-time.After(50 * time.Millisecond):
		}
	}
	w.logger.Info("worker started", "partitions", settings.PartitionCount, "concurrency", w.cfg.Concurrency)
	return nil
}

// Stop claims nothing more, waits for running tasks (up to DrainTimeout),
// gives back the rest, records every outcome and deregisters the node so
// others take over at once. Safe to call twice, and without Start. If ctx
// ends first, Stop returns its error while the shutdown goes on.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	if !w.started || w.done == nil {
		w.stopped = true
		w.mu.Unlock()
		return nil
	}
	w.stopped = true
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

func (w *Worker) onClaimed(job *dispatch.Job) {
	w.metrics.Claimed.Inc()
	if job.HandedOver {
		w.metrics.HandedOver.Inc()
	}
	w.metrics.Running.Inc()
}

func (w *Worker) onFinished(job *dispatch.Job, res dispatch.Result, ran time.Duration) {
	w.metrics.Running.Dec()
	w.metrics.Executed.WithLabelValues(job.Kind, res.Outcome).Inc()
	w.metrics.Duration.WithLabelValues(job.Kind).Observe(ran.Seconds())
	switch res.Outcome {
	case store.OutcomeRetry:
		w.metrics.Retried.WithLabelValues(job.Kind).Inc()
	case store.OutcomeDead:
		w.metrics.Dead.WithLabelValues(job.Kind).Inc()
		w.logger.Warn("task is dead", "ordering_id", job.OrderingID, "task_id", job.ID, "kind", job.Kind,
			"attempt", job.Attempt, "error", res.Error)
	}
}

func (w *Worker) handlerFor(kind string) (Handler, bool) {
	if h, ok := w.cfg.Handlers[kind]; ok {
		return h, true
	}
	h, ok := w.cfg.Handlers["*"]
	return h, ok
}

// exec runs a job's handler and turns its error into an outcome.
func (w *Worker) exec(ctx context.Context, dj *dispatch.Job) dispatch.Result {
	if dj.Attempt == 1 {
		w.metrics.Lateness.Observe(max(dj.StartLateness().Seconds(), 0))
	}
	job := &Job{
		ID: dj.ID, OrderingID: dj.OrderingID, ScheduledAt: dj.ScheduledAt, UniquenessKey: dj.UniquenessKey,
		Kind: dj.Kind, Payload: dj.Payload, Attempt: dj.Attempt, Partition: dj.Partition,
	}
	h, ok := w.handlerFor(job.Kind)
	policy := w.cfg.Retry
	if ok && h.Retry != nil {
		policy = *h.Retry
	}
	var err error
	switch {
	case !ok:
		err = fmt.Errorf("%w %q", ErrNoHandler, job.Kind)
	case h.TxFunc != nil:
		recorded, txErr := w.execTx(ctx, dj, job, h)
		if txErr == nil && recorded {
			return dispatch.Result{Outcome: store.OutcomeCompleted, Recorded: true}
		}
		err = txErr
		if err == nil {
			// Committed nothing: the task is no longer ours.
			return dispatch.Result{Outcome: store.OutcomeRelease}
		}
	default:
		err = h.Func(ctx, job)
	}
	if err == nil {
		return dispatch.Result{Outcome: store.OutcomeCompleted}
	}
	return w.failure(job, policy, err)
}

func (w *Worker) failure(job *Job, policy RetryPolicy, err error) dispatch.Result {
	msg := err.Error()
	var perm permanentError
	if errors.As(err, &perm) {
		return dispatch.Result{Outcome: store.OutcomeDead, Error: msg}
	}
	if policy.MaxAttempts > 0 && job.Attempt >= policy.MaxAttempts {
		return dispatch.Result{Outcome: store.OutcomeDead, Error: fmt.Sprintf("attempt %d of %d: %s", job.Attempt, policy.MaxAttempts, msg)}
	}
	delay := policy.Backoff(job.Attempt, rand.Float64())
	var ra retryAfterError
	if errors.As(err, &ra) {
		delay = ra.after
	}
	return dispatch.Result{Outcome: store.OutcomeRetry, RetryIn: delay, Error: msg}
}

// execTx runs a transactional handler and records completion in its
// transaction. recorded is false when the task was no longer held by this
// node's term, in which case nothing was committed.
func (w *Worker) execTx(ctx context.Context, dj *dispatch.Job, job *Job, h Handler) (recorded bool, err error) {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("beginning handler transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := h.TxFunc(ctx, tx, job); err != nil {
		return false, err
	}
	res, err := w.store.Finish(ctx, tx, w.cfg.NodeID, dj.Epoch, []store.Outcome{{
		Partition: dj.Partition, OrderingID: dj.OrderingID, ID: dj.ID, ClaimedAt: dj.ClaimedAt, Outcome: store.OutcomeCompleted,
	}}, store.Handover{})
	if err != nil {
		return false, fmt.Errorf("recording completion: %w", err)
	}
	if len(res.Applied) != 1 {
		w.logger.Warn("transactional handler rolled back: the task is no longer held by this node's term",
			"ordering_id", dj.OrderingID, "task_id", dj.ID, "epoch", dj.Epoch)
		return false, nil
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("committing handler transaction: %w", err)
	}
	// Counted by the dispatcher's Finished hook, like every outcome.
	return true, nil
}

// listen wakes the dispatcher on NOTIFY from enqueuers, and the duties
// watcher and leader on cluster changes, on a connection of its own,
// reconnecting with backoff.
func (w *Worker) listen(ctx context.Context, due, duties, leader chan<- struct{}) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := w.listenOnce(ctx, due, duties, leader)
		if ctx.Err() != nil {
			return
		}
		w.logger.Warn("listening for notifications failed; polling until reconnected", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (w *Worker) listenOnce(ctx context.Context, due, duties, leader chan<- struct{}) error {
	conn, err := pgx.ConnectConfig(ctx, w.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	assign := w.store.AssignChannel()
	for _, ch := range []string{w.store.NotifyChannel(), assign} {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
	}
	// Whatever happened while not listening: look now.
	poke(duties)
	poke(leader)
	poke(due)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Channel == assign {
			poke(duties)
			poke(leader)
			continue
		}
		poke(due)
	}
}

// poke sends on a wake-up channel without blocking: one pending wake-up is
// enough.
func poke(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// logReadiness logs when outcomes begin or stop being stuck for longer
// than the lease TTL, the state Readiness reports.
func (w *Worker) logReadiness() {
	d, n, err := w.dispatcher.Unrecorded()
	stuck := d > w.cfg.LeaseTTL
	if stuck == w.outcomesStuck {
		return
	}
	w.outcomesStuck = stuck
	if stuck {
		w.logger.Error("task outcomes cannot be recorded; reporting not ready", "tasks", n, "for", d.Round(time.Millisecond), "error", err)
		return
	}
	w.logger.Info("task outcomes are recorded again; ready")
}

// maintain refreshes the cluster and pending gauges. Rescues, depletion
// and completion partitions are the leader's and the stand-ins' work
// (internal/lease).
func (w *Worker) maintain(ctx context.Context) {
	tick := time.NewTicker(w.cfg.MaintenanceInterval)
	defer tick.Stop()
	ticks := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		w.logReadiness()
		if w.node.Current() == nil {
			continue
		}
		if active, inactive, err := w.store.NodeCounts(ctx, w.ctl); err == nil {
			w.metrics.NodesActive.Set(float64(active))
			w.metrics.NodesInactive.Set(float64(inactive))
		}
		// Counting pending tasks scans them: sample it every tenth round.
		if ticks++; ticks%10 == 1 {
			if n, err := w.store.CountPending(ctx, w.ctl); err == nil {
				w.metrics.Pending.Set(float64(n))
			}
		}
	}
}
