package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgsched/pgsched/internal/lease"
	"github.com/pgsched/pgsched/internal/ordering"
	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedtype"
)

// Hooks observe the dispatcher (metrics). Any field may be nil. Every job
// Claimed reports (claimed, or handed over by a finish) is reported once
// by Finished when its outcome is settled: recorded, or Fenced.
type Hooks struct {
	Claimed  func(job *Job)
	Finished func(job *Job, res Result, ran time.Duration)
	// Reconciled reports tasks given back because the database said this
	// node ran them and the node did not know of them (see reconcile).
	Reconciled func(n int)
}

// Config configures a Dispatcher. Every setting but ReconcileDelay must be
// given: the defaults are the worker's (pgsched.WorkerConfig), set in one place.
type Config struct {
	Store store.Store
	DB    store.DBTX
	Node  *lease.Node
	// Partitions returns the partitions this node may claim from now.
	Partitions func() []int32
	// PartitionCount is the schema's number of logical partitions (0:
	// unknown). The finisher runs a second outcome statement beside the
	// first only while this node serves more than half of them (see
	// finisher.run).
	PartitionCount int
	// Concurrency is the most handlers running at once.
	Concurrency int
	// Prefetch is how many claimed tasks may wait for a free handler
	// beyond Concurrency, so a claim (one commit) can take a full batch
	// while handlers are busy instead of a few freed slots at a time.
	// They are tasks of this node's own partitions, so no other node could
	// have run them sooner. 0 prefetches nothing.
	Prefetch int
	Exec     ExecFunc
	// Control says which kinds are paused (a job of one is given back
	// instead of started) and which tasks an operator asked to cancel
	// (recorded dead, not started); see internal/control. Nil: none.
	Control Control
	// Wake receives a value whenever new work may be due (NOTIFY).
	Wake <-chan struct{}
	// ClaimAhead claims tasks due within this much of now and starts each
	// when it is due, so the claim's round trip and commit do not delay the
	// start. 0 claims only tasks already due.
	ClaimAhead time.Duration
	// PollInterval is the fallback re-check when nothing else wakes the
	// loop.
	PollInterval time.Duration
	// FinishBatch is the most outcomes written per statement.
	FinishBatch int
	// FinishDelay is how long the first outcome of a batch may wait for
	// company.
	FinishDelay time.Duration
	// DrainTimeout is how long a stop waits for running handlers before
	// cancelling them.
	DrainTimeout time.Duration
	// ReconcileDelay is how long after a claim or finish statement failed
	// the node compares the tasks the database says it runs with those it
	// knows of (see reconcile), giving the statement time to end on the
	// server. Defaults to 2s.
	ReconcileDelay time.Duration
	Logger         *slog.Logger
	Hooks          Hooks
	// Tracer, when set, gives each run, claim and finish statement a span
	// (see pgschedtype.Tracer). Nil: no tracing, and no cost.
	Tracer pgschedtype.Tracer
}

// Control is the operators' run-time decisions the dispatcher honours.
type Control interface {
	Paused(kind string) bool
	Cancelled(id int64) bool
}

// Dispatcher claims, runs and finishes tasks for one node.
type Dispatcher struct {
	cfg Config
	// lanes runs handlers, at most Concurrency at once and one at a time
	// per ordering_id; claimed tasks beyond that wait in its queue.
	lanes    *ordering.Pool
	inflight atomic.Int64   // claimed tasks whose handlers have not returned
	early    sync.WaitGroup // tasks claimed ahead, waiting for their time
	kick     chan struct{}  // capacity freed or a batch finished
	// changed says work may have become due since the loop last read the
	// due partitions: outcomes were written (successors promoted, retries
	// and releases back in line). A handler returning frees capacity but
	// makes nothing due.
	changed  atomic.Bool
	finish   *finisher
	stopping context.Context // ends when claiming stops
	stopFn   context.CancelFunc
	abort    context.Context
	abortFn  context.CancelFunc

	handlerMu  sync.Mutex
	handlerCtx atomic.Pointer[termContext]

	// known holds the tasks this node started and whose outcome is not
	// yet settled, by id; reconcile compares it with the database. A task
	// given back under one term may be claimed again under the next before
	// the give-back is settled: the newer job replaces the older, and
	// settling the older leaves it (untrack compares jobs, not ids).
	knownMu sync.Mutex
	known   map[int64]*Job
	// failedAt is when a claim or finish statement last failed without
	// saying whether it committed (unix nanoseconds; 0: never).
	failedAt atomic.Int64
	// writing is held shared by every outcome statement until the tasks
	// it handed over are known, and exclusively by reconcile.
	writing sync.RWMutex
}

// statementTimeout bounds a claim or finish statement on the client side.
const statementTimeout = 30 * time.Second

// New validates cfg and returns a Dispatcher.
func New(cfg Config) (*Dispatcher, error) {
	if cfg.Store == nil || cfg.DB == nil || cfg.Node == nil || cfg.Exec == nil || cfg.Partitions == nil {
		return nil, errors.New("dispatch: Store, DB, Node, Partitions and Exec are required")
	}
	// The worker fills in the defaults (pgsched.WorkerConfig); here every
	// setting must be given.
	switch {
	case cfg.Concurrency <= 0:
		return nil, fmt.Errorf("dispatch: concurrency must be positive, got %d", cfg.Concurrency)
	case cfg.Prefetch < 0:
		return nil, fmt.Errorf("dispatch: prefetch must not be negative, got %d", cfg.Prefetch)
	case cfg.PollInterval <= 0, cfg.FinishDelay <= 0, cfg.DrainTimeout <= 0:
		return nil, fmt.Errorf("dispatch: PollInterval %s, FinishDelay %s and DrainTimeout %s must be positive",
			cfg.PollInterval, cfg.FinishDelay, cfg.DrainTimeout)
	case cfg.FinishBatch <= 0:
		return nil, fmt.Errorf("dispatch: FinishBatch must be positive, got %d", cfg.FinishBatch)
	}
	if cfg.ReconcileDelay <= 0 {
		cfg.ReconcileDelay = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Dispatcher{cfg: cfg, lanes: ordering.New(cfg.Concurrency), kick: make(chan struct{}, 1),
		known: map[int64]*Job{}}
	d.stopping, d.stopFn = context.WithCancel(context.Background())
	d.abort, d.abortFn = context.WithCancel(context.Background())
	d.finish = &finisher{
		cfg: cfg, after: d.outcomesWritten, handover: d.handover, handedOver: d.startHandedOver,
		settled: d.untrack, failed: d.statementFailed, writing: &d.writing,
		signal: make(chan struct{}, 1), closed: make(chan struct{}),
	}
	return d, nil
}

// Inflight is the number of claimed tasks whose handlers have not returned.
func (d *Dispatcher) Inflight() int { return int(d.inflight.Load()) }

// Unrecorded reports how long outcomes have been failing to be written
// (the database down, or refusing some), how many wait, and the last
// error; zero while outcomes are written.
func (d *Dispatcher) Unrecorded() (time.Duration, int, error) { return d.finish.unrecorded() }

// outcomesWritten tells the loop that outcomes written to the database may
// have made work due: successors promoted and not handed over, or tasks
// given back.
func (d *Dispatcher) outcomesWritten() {
	d.changed.Store(true)
	d.poke()
}

// handoverLimit is how many tasks of one ordering_id may follow each other
// on a node by handover before the next has to be claimed: a claim takes
// the longest-waiting heads first, so ordering_ids queued behind busy
// chains get their turn at least every handoverLimit tasks of each.
const handoverLimit = 16

// handover says which due successors of a batch's finished tasks the batch
// may start on this node: one per task finished for good (each freed a
// handler), only under the current term and while claiming.
func (d *Dispatcher) handover(epoch int64, finished int) store.Handover {
	term := d.cfg.Node.Current()
	if finished == 0 || term == nil || term.Epoch != epoch || d.stopping.Err() != nil {
		return store.Handover{}
	}
	return store.Handover{Max: finished, Partitions: d.cfg.Partitions(), Limit: handoverLimit}
}

// startHandedOver runs successors handed over by a finish like claimed
// tasks, or gives them back if the term ended or a stop began meanwhile.
func (d *Dispatcher) startHandedOver(epoch int64, jobs []store.Claimed) {
	received := time.Now()
	term := d.cfg.Node.Current()
	for i := range jobs {
		job := &Job{Claimed: &jobs[i], Epoch: epoch, Received: received, HandedOver: true}
		if term == nil || term.Epoch != epoch || d.stopping.Err() != nil {
			if f := d.cfg.Hooks.Claimed; f != nil {
				f(job) // its release reports Finished
			}
			d.finish.add(job, Result{Outcome: pgschedtype.OutcomeRelease}, 0)
			continue
		}
		d.start(term, job)
	}
}

func (d *Dispatcher) poke() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// Run claims and runs tasks until ctx ends, then drains (see the package doc).
func (d *Dispatcher) Run(ctx context.Context) error {
	finishDone := make(chan struct{})
	go func() { defer close(finishDone); d.finish.run() }()

	d.loop(ctx)
	d.stopFn()
	d.giveBackQueued(func(*Job) bool { return true })
	d.early.Wait()

	// Drain: wait for handlers, then cancel the stragglers.
	drained := make(chan struct{})
	go func() { d.lanes.Wait(); close(drained) }()
	timer := time.NewTimer(d.cfg.DrainTimeout)
	select {
	case <-drained:
	case <-timer.C:
		d.cfg.Logger.Warn("drain timeout passed; cancelling running handlers", "running", d.Inflight())
		d.abortFn()
		<-drained
	}
	timer.Stop()
	d.lanes.Close()
	d.abortFn()
	d.finish.close()
	<-finishDone
	return nil
}

func (d *Dispatcher) loop(ctx context.Context) {
	c := &claimer{d: d, stale: true}
	var lastTerm *lease.Term
	var failedSeen int64 // the failure the reconcile checks below are for
	checks := 0          // reconcile checks done for it
	timer := time.NewTimer(0)
	defer timer.Stop()
	backoff := 10 * time.Millisecond
	for ctx.Err() == nil {
		term := d.cfg.Node.Current()
		if term != lastTerm {
			if lastTerm != nil {
				// The term ended: its tasks waiting for a handler are no
				// longer this node's to run.
				d.giveBackQueued(func(j *Job) bool { return term == nil || j.Epoch != term.Epoch })
			}
			c.invalidate()
			lastTerm = term
		}
		if term == nil {
			select {
			case <-ctx.Done():
			case <-d.cfg.Node.Changed():
			}
			continue
		}
		if d.changed.Swap(false) {
			c.stale = true
		}
		wait := d.cfg.PollInterval
		capacity := d.cfg.Concurrency + d.cfg.Prefetch
		free := capacity - d.Inflight()
		// Every claim is a commit: while handlers are still busy, wait for a
		// quarter of the capacity to free up rather than claim one at a time.
		if d.Inflight() > 0 && free < max(1, capacity/4) {
			free = 0
		}
		if free > 0 {
			jobs, received, claimed, err := c.claim(ctx, term, free)
			// Jobs come with an error too, from the committed part of a
			// claim split over Citus workers.
			for i := range jobs {
				d.start(term, &Job{Claimed: &jobs[i], Epoch: term.Epoch, Received: received})
			}
			if err != nil {
				d.sleep(ctx, backoff)
				backoff = min(backoff*2, d.cfg.PollInterval)
				continue
			}
			if claimed {
				backoff = 10 * time.Millisecond
			}
			wait = c.wait()
		}
		if at := d.failedAt.Load(); at != 0 {
			if at != failedSeen {
				failedSeen, checks = at, 0
			}
			if checks < 2 {
				// Soon after the failure, and again once the statement has
				// surely ended on the server (it may outlive the client's
				// timeout by its own run time).
				when := time.Unix(0, at).Add(d.cfg.ReconcileDelay)
				if checks == 1 {
					when = when.Add(statementTimeout)
				}
				if until := time.Until(when); until > 0 {
					wait = min(wait, until)
				} else if err := d.reconcile(ctx, term); err != nil {
					if ctx.Err() == nil {
						d.cfg.Logger.Warn("comparing running tasks with the database failed; will retry", "error", err)
					}
					wait = min(wait, backoff)
				} else {
					checks++
				}
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
		case <-timer.C:
		case <-d.cfg.Wake:
			c.stale = true
		case <-d.kick:
		case <-term.Done():
		}
	}
}

func (d *Dispatcher) sleep(ctx context.Context, dur time.Duration) {
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
