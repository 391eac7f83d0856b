// Package node is one worker process's part of the cluster: the
// components a node runs, built from one Config and run together. A task's
// path through it goes one way:
//
//	dispatch (claim, queue in order) ─▶ execute (handler, retry policy)
//	    ─▶ dispatch's finisher (outcomes in batches, hand-overs)
//
// with internal/control holding the operators' decisions the dispatcher
// honours (paused kinds, cancel requests), internal/observe turning what
// happens into metrics, history and logs, internal/lease keeping the
// node's lease, its duties and the leadership, and internal/maintenance
// running the periodic duties (the leader's in its round, every node's in
// the maintenance loop).
//
// The public pgsched.Worker validates its configuration, then starts and
// stops a Node; everything that runs is here and below.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgsched/pgsched/internal/control"
	"github.com/pgsched/pgsched/internal/dispatch"
	"github.com/pgsched/pgsched/internal/execute"
	"github.com/pgsched/pgsched/internal/lease"
	"github.com/pgsched/pgsched/internal/metrics"
	"github.com/pgsched/pgsched/internal/observe"
	"github.com/pgsched/pgsched/internal/schemaversion"
	"github.com/pgsched/pgsched/internal/stats"
	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedtype"
)

// Config is a node's settings, every default filled in (pgsched.Worker
// does that).
type Config struct {
	Pool    *pgxpool.Pool // the caller's: transactional handlers run here
	Schema  string
	NodeID  string
	Kinds   map[string]execute.Kind
	Retry   pgschedtype.RetryPolicy
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// Recurring schedules are upserted at start.
	Recurring []store.RecurringDef

	Concurrency, Prefetch, FinishBatch, MaxOutput                       int
	LeaseTTL, ClaimAhead, PollInterval, MaintenanceInterval             time.Duration
	CountInterval, ClusterInterval, DrainTimeout, FlexDown, FinishDelay time.Duration

	// Settled, when set, is told of every settled outcome (tests).
	Settled func(job *dispatch.Job, res dispatch.Result)
	// Tracer traces runs, claims and finishes; nil traces nothing.
	Tracer pgschedtype.Tracer
}

// Node is one run of a node, from Start until it has stopped.
type Node struct {
	cfg     Config
	store   store.Store
	ctl     *pgxpool.Pool      // the node's own control connections
	cancel  context.CancelFunc // ends claiming, listening and maintenance
	done    chan struct{}      // closed when the run has ended
	control *control.State
	stats   stats.Recorder

	// lease and disp are set once built; Status reads them meanwhile.
	mu    sync.Mutex
	lease *lease.Node
	disp  *dispatch.Dispatcher

	// outcomesStuck is what logReadiness last logged (maintain's only).
	outcomesStuck bool
}

// New returns a Node to start.
func New(cfg Config) *Node { return &Node{cfg: cfg} }

// Start checks the schema, registers the node and starts working in the
// background. It returns once the first lease is held; stopped makes it
// give up (a Stop while starting). On an error nothing is left running.
// A Node is started once.
func (n *Node) Start(ctx context.Context, stopped <-chan struct{}) error {
	var err error
	if n.ctl, err = openControl(ctx, n.cfg.Pool); err != nil {
		return err
	}
	settings, err := n.checkSchema(ctx)
	if err != nil {
		n.ctl.Close()
		return err
	}
	p, err := n.build(int(settings.PartitionCount))
	if err != nil {
		n.ctl.Close()
		return err
	}
	n.launch(ctx, p)
	if err := awaitLease(ctx, p.lease, n.done, stopped); err != nil {
		n.cancel()
		<-n.done
		return err
	}
	n.cfg.Logger.Info("worker started", "partitions", settings.PartitionCount, "concurrency", n.cfg.Concurrency)
	return nil
}

// Status is how a node stands, for its readiness.
type Status struct {
	// Built: the node's lease and dispatcher exist (Start got that far).
	Built bool
	// Live: the node holds a live lease term.
	Live bool
	// Waiting says why the node may not register yet (nil: it need not).
	Waiting *lease.WaitError
	// Unrecorded: how long outcomes have failed to be written, how many
	// wait, and the last error.
	UnrecordedFor time.Duration
	Unrecorded    int
	Err           error
}

// Status reports how the node stands now.
func (n *Node) Status() Status {
	n.mu.Lock()
	l, d := n.lease, n.disp
	n.mu.Unlock()
	if l == nil || d == nil {
		return Status{}
	}
	s := Status{Built: true, Live: l.Current() != nil, Waiting: l.Waiting()}
	s.UnrecordedFor, s.Unrecorded, s.Err = d.Unrecorded()
	return s
}

// openControl opens the control plane's pool (lease, claims, outcomes,
// maintenance): a small one of its own, so busy handlers on the caller's
// pool can never starve lease renewal. It connects lazily.
func openControl(ctx context.Context, pool *pgxpool.Pool) (*pgxpool.Pool, error) {
	ctlCfg := pool.Config()
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
// on a distributed schema), and prepares completion partitions: the first
// statements to reach the database, so their errors say whether it is
// reachable and migrated.
func (n *Node) checkSchema(ctx context.Context) (store.Settings, error) {
	st, err := store.New(n.cfg.Schema)
	if err != nil {
		return store.Settings{}, err
	}
	version, err := st.SchemaVersion(ctx, n.ctl)
	if err != nil {
		return store.Settings{}, err
	}
	if err := schemaversion.Check(version, "the worker"); err != nil {
		return store.Settings{}, fmt.Errorf("pgsched: %w", err)
	}
	settings, err := st.Settings(ctx, n.ctl)
	if err != nil {
		return settings, err
	}
	// The store the schema needs: on Citus, claims and outcomes go to the
	// Citus workers.
	if n.store, err = store.Open(ctx, n.ctl, n.cfg.Schema); err != nil {
		return settings, err
	}
	if _, err := n.store.EnsureCompletionPartitions(ctx, n.ctl, 3); err != nil {
		return settings, fmt.Errorf("preparing completion partitions: %w", err)
	}
	for _, r := range n.cfg.Recurring {
		res, err := n.store.RecurringUpsert(ctx, n.ctl, r)
		if err != nil {
			return settings, fmt.Errorf("recurring schedule %q: %w", r.Name, err)
		}
		msg := "recurring schedule upserted"
		if res == "inserted" {
			msg = "recurring schedule created"
		}
		n.cfg.Logger.Info(msg, "schedule", r.Name, "spec", r.Spec, "time_zone", r.TimeZone, "kind", r.Kind, "missed", r.Missed)
	}
	return settings, nil
}

// parts are the components of one run of the node.
type parts struct {
	lease                        *lease.Node
	disp                         *dispatch.Dispatcher
	duties                       *lease.Duties
	leader                       *lease.Leader
	leaderDuties, nodeDuties     *maintenanceRunners
	wake, dutiesWake, leaderWake chan struct{}
	pauseWake, cancelWake        chan struct{}
}

// launch starts the run's goroutines. n.done is closed once they have all
// ended and the control pool is closed.
func (n *Node) launch(ctx context.Context, p *parts) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	nodeCtx, nodeStop := context.WithCancel(context.WithoutCancel(ctx))
	n.cancel, n.done = cancel, make(chan struct{})

	var wg sync.WaitGroup
	nodeDone := make(chan struct{})
	go func() { defer close(nodeDone); _ = p.lease.Run(nodeCtx) }()
	wg.Go(func() { _ = p.leader.Run(runCtx) })
	wg.Go(func() { _ = p.duties.Run(runCtx) })
	wg.Go(func() { n.listen(runCtx, p.wake, p.dutiesWake, p.leaderWake, p.pauseWake, p.cancelWake) })
	wg.Go(func() { n.maintain(runCtx, p) })
	wg.Go(func() { p.leaderDuties.runner.Run(runCtx) })
	wg.Go(func() { _ = p.disp.Run(runCtx) })
	go func() {
		wg.Wait()
		// What the drain finished goes into the history too.
		if err := p.nodeDuties.flush.Round(ctx, lease.Leadership{}); err != nil {
			n.cfg.Logger.Warn("adding the last outcomes to the throughput history failed", "error", err)
		}
		// The lease ends last: outcomes of draining tasks need its term.
		nodeStop()
		<-nodeDone
		n.ctl.Close()
		close(n.done)
	}()
}

// awaitLease waits for the node's first lease, for ctx to end, for the
// run to end (done) or for a Stop while starting (stopped).
func awaitLease(ctx context.Context, node *lease.Node, done, stopped <-chan struct{}) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for node.Current() == nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			return ErrStoppedWhileStarting
		case <-stopped:
			return ErrStoppedWhileStarting
		case <-node.Changed():
		case <-tick.C:
		}
	}
	return nil
}

// ErrStoppedWhileStarting is what Start returns when Stop ends it.
var ErrStoppedWhileStarting = errors.New("pgsched: stopped while starting")

// Stop claims nothing more, waits for running tasks (up to the drain
// timeout), gives back the rest, records every outcome and deregisters
// the node so others take over at once. If ctx ends first, Stop returns
// its error while the shutdown goes on.
func (n *Node) Stop(ctx context.Context) error {
	// Hand the partitions over before draining, not after: the backup and
	// the leader take them at once while running tasks finish here.
	lctx, lcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	if err := n.lease.Leave(lctx); err != nil {
		n.cfg.Logger.Warn("announcing the leave failed; partitions move when the node deregisters", "error", err)
	}
	lcancel()
	n.cancel()
	select {
	case <-n.done:
		n.cfg.Logger.Info("worker stopped")
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Hostname is os.Hostname, or "" when it fails.
func hostname() string {
	h, _ := os.Hostname()
	return h
}

// newObserver is what reports the node's tasks to its metrics, history
// and log.
func (n *Node) newObserver() *observe.Tasks {
	return &observe.Tasks{Metrics: n.cfg.Metrics, Stats: &n.stats, Logger: n.cfg.Logger, Settled: n.cfg.Settled}
}
