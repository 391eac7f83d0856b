package pgsched

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

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
