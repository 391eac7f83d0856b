package pgsched

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsched/pgsched/internal/dispatch"
)

// flushTimeout bounds a write of the throughput history, which a stop
// does not cancel half-way (see maintain).
const flushTimeout = 2 * time.Second

// listen wakes the dispatcher on NOTIFY from enqueuers, and the duties
// watcher and leader on cluster changes, on a connection of its own,
// reconnecting with backoff.
func (w *Worker) listen(ctx context.Context, due, duties, leader, pause, cancel chan<- struct{}) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := w.listenOnce(ctx, due, duties, leader, pause, cancel)
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

func (w *Worker) listenOnce(ctx context.Context, due, duties, leader, pause, cancel chan<- struct{}) error {
	conn, err := pgx.ConnectConfig(ctx, w.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	assign, paused, cancels := w.store.AssignChannel(), w.store.PauseChannel(), w.store.CancelChannel()
	for _, ch := range []string{w.store.NotifyChannel(), assign, paused, cancels} {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
	}
	// Whatever happened while not listening: look now.
	poke(duties)
	poke(leader)
	poke(due)
	poke(pause)
	poke(cancel)
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
		if n.Channel == paused {
			poke(pause)
			continue
		}
		if n.Channel == cancels {
			poke(cancel)
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

// maintain refreshes the cluster, pending and set-aside schedule gauges. Rescues, depletion
// and completion partitions are the leader's and the stand-ins' work
// (internal/lease).
func (w *Worker) maintain(ctx context.Context, pauseWake, cancelWake <-chan struct{}, disp *dispatch.Dispatcher) {
	tick := time.NewTicker(w.cfg.MaintenanceInterval)
	defer tick.Stop()
	ticks := 0
	w.refreshPaused(ctx, disp)
	for {
		select {
		case <-ctx.Done():
			return
		case <-pauseWake:
			w.refreshPaused(ctx, disp)
			continue
		case <-cancelWake:
			w.refreshCancels(ctx, disp)
			continue
		case <-tick.C:
		}
		w.refreshPaused(ctx, disp)
		w.refreshCancels(ctx, disp)
		w.logReadiness()
		if w.node.Current() == nil {
			continue
		}
		if active, inactive, err := w.store.NodeCounts(ctx, w.ctl); err == nil {
			w.metrics.NodesActive.Set(float64(active))
			w.metrics.NodesInactive.Set(float64(inactive))
		}
		// Never cancelled half-way by a stop: a flush the server commits
		// while the client gives up would be added again by the next one.
		fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
		if err := w.stats.Flush(fctx, w.store, w.ctl, w.cfg.NodeID); err != nil {
			w.logger.Warn("adding outcomes to the throughput history failed; the next round adds them", "error", err)
		}
		fcancel()
		// The leader counts per kind (stats.Counter) every few seconds;
		// reading its sum every tenth round is fresh enough. Schedules
		// change state rarer still.
		if ticks++; ticks%10 == 1 {
			if n, err := w.store.CountedPending(ctx, w.ctl); err == nil {
				w.metrics.Pending.Set(float64(n))
			}
			if n, err := w.store.RecurringSetAsideCount(ctx, w.ctl); err == nil {
				w.metrics.RecurringSetAside.Set(float64(n))
			}
		}
	}
}

// isPaused reports whether kind is paused cluster-wide, as last read.
func (w *Worker) isPaused(kind string) bool {
	m := w.paused.Load()
	return m != nil && (*m)[kind]
}

// refreshPaused reads the paused kinds, logs what changed and gives back
// the claimed tasks of newly paused kinds that have not started. Claims
// and hand-overs skip paused kinds in the database already; this covers
// tasks this node took before the pause.
func (w *Worker) refreshPaused(ctx context.Context, disp *dispatch.Dispatcher) {
	kinds, err := w.store.PausedKinds(ctx, w.ctl)
	if err != nil {
		if ctx.Err() == nil {
			w.logger.Warn("reading paused kinds failed; will retry", "error", err)
		}
		return
	}
	now := make(map[string]bool, len(kinds))
	for _, k := range kinds {
		now[k.Kind] = true
	}
	before := w.paused.Swap(&now)
	newly := false
	for k := range now {
		if before == nil || !(*before)[k] {
			newly = true
			w.logger.Info("kind paused: its tasks are not started", "kind", k)
		}
	}
	if before != nil {
		for k := range *before {
			if !now[k] {
				w.logger.Info("kind resumed", "kind", k)
			}
		}
	}
	w.metrics.KindsPaused.Set(float64(len(now)))
	if newly {
		disp.GiveBackPaused()
	}
}

// isCancelled reports whether an operator asked to cancel the task with
// this id, as last read.
func (w *Worker) isCancelled(id int64) bool {
	m := w.cancels.Load()
	return m != nil && (*m)[id]
}

// refreshCancels reads the cancel requests and cancels the tasks among
// them this node holds (see dispatch.CancelTasks).
func (w *Worker) refreshCancels(ctx context.Context, disp *dispatch.Dispatcher) {
	ids, err := w.store.CancelRequests(ctx, w.ctl)
	if err != nil {
		if ctx.Err() == nil {
			w.logger.Warn("reading cancel requests failed; will retry", "error", err)
		}
		return
	}
	set := make(map[int64]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	w.cancels.Store(&set)
	if len(set) > 0 {
		disp.CancelTasks(set)
	}
}
