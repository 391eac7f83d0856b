package pgsched

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgsched/pgsched/internal/dispatch"
	"github.com/pgsched/pgsched/internal/execute"
	"github.com/pgsched/pgsched/internal/metrics"
	"github.com/pgsched/pgsched/internal/node"
	"github.com/pgsched/pgsched/internal/store"
)

// ErrNoHandler is the failure recorded for a task whose kind has no handler.
var ErrNoHandler = execute.ErrNoHandler

// Worker is one node of the cluster: it holds a lease, claims due tasks from
// its partitions, runs them with the configured handlers and records the
// outcomes. Any number of workers may share a schema. What runs is
// internal/node; the Worker is its public face: configuration, Start, Stop
// and readiness.
type Worker struct {
	pool    *pgxpool.Pool // the caller's: transactional handlers run here
	cfg     WorkerConfig
	kinds   map[string]execute.Kind
	metrics *metrics.Metrics
	logger  *slog.Logger

	mu       sync.Mutex
	starting bool          // a Start is in progress
	started  bool          // Start succeeded
	stopping chan struct{} // closed by a Stop while starting: that Start gives up
	startEnd chan struct{} // closed when the Start in progress returns
	run      *node.Node    // the current run; nil before Start and after a failed one
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
// failover, for one lease TTL), or outcomes that have failed to be written
// for longer than the lease TTL (successful tasks would stay "running"
// while the node looked healthy).
func (w *Worker) Readiness() error {
	w.mu.Lock()
	run := w.run
	w.mu.Unlock()
	if run == nil {
		return errors.New("not started")
	}
	s := run.Status()
	switch {
	case !s.Built:
		return errors.New("not started")
	case !s.Live && s.Waiting != nil && s.Waiting.Reason == store.WaitFailover:
		return fmt.Errorf("%w: %w", ErrFailoverWait, s.Waiting)
	case !s.Live && s.Waiting != nil:
		return fmt.Errorf("%w: %w", ErrNodeIDInUse, s.Waiting)
	case !s.Live:
		return errors.New("no live lease (database unreachable or starting)")
	case s.UnrecordedFor > w.cfg.LeaseTTL:
		return fmt.Errorf("outcomes of %d tasks unrecorded for %s: %w", s.Unrecorded, s.UnrecordedFor.Round(time.Millisecond), s.Err)
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
	run := node.New(w.nodeConfig())
	w.starting, w.stopping, w.startEnd, w.run = true, make(chan struct{}), make(chan struct{}), run
	stopping, startEnd := w.stopping, w.startEnd
	w.mu.Unlock()
	err := run.Start(ctx, stopping)
	w.mu.Lock()
	w.starting, w.started = false, err == nil
	if err != nil {
		w.run = nil
	}
	close(startEnd)
	w.mu.Unlock()
	if errors.Is(err, node.ErrStoppedWhileStarting) {
		return errStoppedWhileStarting
	}
	return startError(err)
}

// nodeConfig is the run's configuration: the worker's, defaults filled in.
func (w *Worker) nodeConfig() node.Config {
	c := w.cfg
	defs := make([]store.RecurringDef, len(c.Recurring))
	for i, r := range c.Recurring {
		defs[i] = r.def()
	}
	var settled func(*dispatch.Job, dispatch.Result)
	if f := c.onOutcome; f != nil {
		settled = func(job *dispatch.Job, res dispatch.Result) {
			f(Outcome{Key: Key{OrderingID: job.OrderingID, ScheduledAt: job.ScheduledAt, UniquenessKey: job.UniquenessKey},
				ID: job.ID, Kind: job.Kind, Attempt: job.Attempt, Result: res.Outcome})
		}
	}
	return node.Config{
		Pool: w.pool, Schema: c.Schema, NodeID: c.NodeID, Kinds: w.kinds, Retry: c.Retry, Metrics: w.metrics,
		Logger: w.logger, Recurring: defs, Settled: settled,
		Concurrency: c.Concurrency, Prefetch: c.Prefetch, FinishBatch: c.FinishBatch,
		LeaseTTL: c.LeaseTTL, ClaimAhead: c.ClaimAhead, PollInterval: c.PollInterval,
		MaintenanceInterval: c.MaintenanceInterval, CountInterval: c.CountInterval, ClusterInterval: c.ClusterInterval,
		DrainTimeout: c.DrainTimeout, FlexDown: c.FlexDown, FinishDelay: c.FinishDelay, MaxOutput: c.MaxOutputBytes,
		Tracer: c.Tracer,
	}
}

// Stop claims nothing more, waits for running tasks (up to DrainTimeout),
// gives back the rest, records every outcome and deregisters the node so
// others take over at once. Safe to call twice, without Start and after a
// failed Start; a Start still in progress gives up and returns an error.
// If ctx ends first, Stop returns its error while the shutdown goes on.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	if w.starting {
		// That Start gives up, undoing what it built; Stop returns once it
		// has.
		select {
		case <-w.stopping:
		default:
			close(w.stopping)
		}
		startEnd := w.startEnd
		w.mu.Unlock()
		select {
		case <-startEnd:
		case <-ctx.Done():
			return ctx.Err()
		}
		w.mu.Lock() // a Start that held its lease before it saw the Stop ran on
	}
	run := w.run
	w.run = nil
	w.mu.Unlock()
	if run == nil {
		return nil
	}
	return run.Stop(ctx)
}
