package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/pgsched/pgsched/internal/lease"
	"github.com/pgsched/pgsched/pgschedtype"
)

// Running: a claimed job goes to a handler lane when due, runs with
// a context that ends with its node term, and its result goes to the
// finisher; jobs not started are given back.

// start hands a job to the handler pool; a job claimed ahead of its time
// goes there when due (on the database's clock), so that it holds no
// handler while it waits.
func (d *Dispatcher) start(term *lease.Term, job *Job) {
	d.knownMu.Lock()
	d.known[job.ID] = job
	d.knownMu.Unlock()
	d.inflight.Add(1)
	if f := d.cfg.Hooks.Claimed; f != nil {
		f(job)
	}
	if early := job.RunAt.Sub(job.ClaimedAt) - time.Since(job.Received); early > 0 {
		d.early.Add(1)
		go func() {
			defer d.early.Done()
			t := time.NewTimer(early)
			select {
			case <-t.C:
			case <-term.Done():
			case <-d.stopping.Done():
			case <-d.abort.Done():
			}
			t.Stop()
			d.submit(term, job)
		}()
		return
	}
	d.submit(term, job)
}

// submit queues job for a handler: a task of a priority above the
// default goes before the claimed tasks of the default that wait.
func (d *Dispatcher) submit(term *lease.Term, job *Job) {
	if job.Priority > 0 {
		d.lanes.SubmitUrgent(job.OrderingID, func() { d.run(term, job) })
		return
	}
	d.lanes.Submit(job.OrderingID, func() { d.run(term, job) })
}

// run runs a job's handler and queues its outcome. A job that has not
// started when claiming stops, its term ends or the stop deadline passes
// goes back untouched.
func (d *Dispatcher) run(term *lease.Term, job *Job) {
	if !job.state.CompareAndSwap(jobQueued, jobStarted) {
		return // given back while it waited
	}
	defer func() {
		d.inflight.Add(-1)
		d.poke()
	}()
	// Live, not only the term's context: a node waking from a freeze runs
	// this before its lease goroutine has seen the loss (see lease.Term).
	if !term.Live() || d.stopping.Err() != nil || d.abort.Err() != nil || d.paused(job.Kind) {
		d.finish.add(job, Result{Outcome: pgschedtype.OutcomeRelease}, 0)
		return
	}
	if d.cfg.Control != nil && d.cfg.Control.Cancelled(job.ID) {
		d.finish.add(job, cancelledResult(""), 0)
		return
	}
	hc := d.handlerContext(term)
	ctx, cancel := context.WithCancelCause(hc.base)
	job.cancelMu.Lock()
	job.cancel = cancel
	switch {
	case job.cancelled: // asked between the start and now
		cancel(ErrCancelled)
	case hc.ctx.Err() != nil: // the term ended before cancel was set (see handlerContext)
		cancel(context.Cause(hc.ctx))
	}
	job.cancelMu.Unlock()
	var end func(pgschedtype.Outcome, string)
	if tr := d.cfg.Tracer; tr != nil {
		// The handler runs in the run's span (see pgschedtype.Tracer).
		ctx, end = tr.StartRun(ctx, job.Claimed)
	}
	began := time.Now()
	res := d.exec(ctx, job)
	ran := time.Since(began)
	cancel(nil)
	job.cancelMu.Lock()
	job.cancel = nil
	if job.cancelled && res.Outcome != pgschedtype.OutcomeCompleted && res.Outcome != pgschedtype.OutcomeRelease {
		res = cancelledResult(res.Error)
	}
	job.cancelMu.Unlock()
	if res.Outcome == pgschedtype.OutcomeRetry && d.abort.Err() != nil {
		// Cancelled by a stop: back in line at once, not after a backoff.
		res.RetryIn = 0
	}
	if end != nil {
		end(res.Outcome, res.Error)
	}
	if res.Recorded {
		// Written by the handler's own transaction.
		d.untrack([]*Job{job})
		d.changed.Store(true)
		if f := d.cfg.Hooks.Finished; f != nil {
			f(job, res, ran)
		}
		return
	}
	d.finish.add(job, res, ran)
}

// cancelledResult is the outcome of a task an operator cancelled: dead,
// with the reason and what the handler said.
func cancelledResult(handlerErr string) Result {
	msg := ErrCancelled.Error()
	if handlerErr != "" {
		msg += ": " + handlerErr
	}
	return Result{Outcome: pgschedtype.OutcomeDead, Error: msg}
}

// CancelTasks cancels the handlers of the running tasks in ids and records
// those in ids still waiting for a handler as cancelled. The outcome of a
// cancelled handler is dead (see cancelledResult), unless it completed.
func (d *Dispatcher) CancelTasks(ids map[int64]bool) {
	var queued []*Job
	d.knownMu.Lock()
	for id := range ids {
		j, ok := d.known[id]
		if !ok {
			continue
		}
		if j.state.CompareAndSwap(jobQueued, jobGivenBack) {
			queued = append(queued, j)
			continue
		}
		j.cancelMu.Lock()
		if !j.cancelled {
			j.cancelled = true
			if j.cancel != nil {
				j.cancel(ErrCancelled)
			}
			d.cfg.Logger.Info("cancelling a running task at an operator's request",
				"ordering_id", j.OrderingID, "task_id", j.ID, "kind", j.Kind)
		}
		j.cancelMu.Unlock()
	}
	d.knownMu.Unlock()
	for _, j := range queued {
		d.cfg.Logger.Info("cancelled a task before it started, at an operator's request",
			"ordering_id", j.OrderingID, "task_id", j.ID, "kind", j.Kind)
		d.finish.add(j, cancelledResult(""), 0)
		d.inflight.Add(-1)
	}
	if len(queued) > 0 {
		d.poke()
	}
}

func (d *Dispatcher) paused(kind string) bool {
	return d.cfg.Control != nil && d.cfg.Control.Paused(kind)
}

// GiveBackPaused gives back at once the claimed jobs waiting for a handler
// whose kind is now paused (Config.Paused).
func (d *Dispatcher) GiveBackPaused() {
	d.giveBackQueued(func(j *Job) bool { return d.paused(j.Kind) })
}

// giveBackQueued gives back the claimed jobs that match and are still
// waiting for a handler, at once: when a stop begins (prefetched tasks),
// and when a term ends (its tasks are no longer this node's to run). They
// would otherwise wait until a handler is free to look at them, which a
// handler ignoring its cancelled context could put off for good.
func (d *Dispatcher) giveBackQueued(match func(*Job) bool) {
	var back []*Job
	d.knownMu.Lock()
	for _, j := range d.known {
		if match(j) && j.state.CompareAndSwap(jobQueued, jobGivenBack) {
			back = append(back, j)
		}
	}
	d.knownMu.Unlock()
	for _, j := range back {
		d.finish.add(j, Result{Outcome: pgschedtype.OutcomeRelease}, 0)
		d.inflight.Add(-1)
	}
	if len(back) > 0 {
		d.poke()
	}
}

// termContext is the context handlers of one term run under.
type termContext struct {
	term *lease.Term
	// ctx ends when the term ends or the stop deadline passes; base
	// carries its values but not its end, and is what each handler's own
	// context derives from (see handlerContext).
	ctx, base context.Context
}

// handlerContext returns the contexts for handlers run under term. Each
// handler's context derives from base, which never ends, so creating and
// ending one touches nothing shared: derived from ctx, every task would
// register with it and unregister under its one lock, a cost paid per
// task on the hot path. When ctx ends, one sweep cancels the contexts of
// the term's running handlers with its cause, and a handler starting
// after the sweep sees ctx ended (run).
func (d *Dispatcher) handlerContext(term *lease.Term) *termContext {
	if c := d.handlerCtx.Load(); c != nil && c.term == term {
		return c
	}
	d.handlerMu.Lock()
	defer d.handlerMu.Unlock()
	if c := d.handlerCtx.Load(); c != nil && c.term == term {
		return c
	}
	ctx, cancel := context.WithCancel(term.Context())
	// Registered until the stop deadline (or the end of Run): one per term.
	context.AfterFunc(d.abort, cancel)
	ctx = context.WithValue(ctx, fenceKey{}, term)
	c := &termContext{term: term, ctx: ctx, base: context.WithoutCancel(ctx)}
	context.AfterFunc(ctx, func() { d.cancelHandlers(c) })
	d.handlerCtx.Store(c)
	return c
}

// cancelHandlers cancels the contexts of the handlers running under c's
// term, with the cause c.ctx ended with.
func (d *Dispatcher) cancelHandlers(c *termContext) {
	cause := context.Cause(c.ctx)
	d.knownMu.Lock()
	defer d.knownMu.Unlock()
	for _, j := range d.known {
		if j.Epoch != c.term.Epoch {
			continue
		}
		j.cancelMu.Lock()
		if j.cancel != nil {
			j.cancel(cause)
		}
		j.cancelMu.Unlock()
	}
}

type fenceKey struct{}

// CheckFence returns lease.ErrExpired (wrapped) when ctx is a handler's
// context whose node term is no longer live by the node's own clock, and
// nil otherwise (also for a context that is not a handler's). A handler
// calls it right before a side effect it cannot take back, such as an
// HTTP request: the term's context may not have been cancelled yet when
// the node wakes from a freeze.
func CheckFence(ctx context.Context) error {
	if term, ok := ctx.Value(fenceKey{}).(*lease.Term); ok {
		return term.Check()
	}
	return nil
}

func (d *Dispatcher) exec(ctx context.Context, job *Job) (res Result) {
	defer func() {
		if r := recover(); r != nil {
			d.cfg.Logger.Error("handler panicked", "ordering_id", job.OrderingID, "task_id", job.ID, "panic", r)
			res = Result{Outcome: pgschedtype.OutcomeRetry, RetryIn: time.Second, Error: fmt.Sprintf("handler panicked: %v", r)}
		}
	}()
	return d.cfg.Exec(ctx, job)
}
