package node

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsched/pgsched/internal/lease"
	"github.com/pgsched/pgsched/internal/metrics"
	"github.com/pgsched/pgsched/internal/store"
)

// listen wakes the dispatcher on NOTIFY from enqueuers, the duties watcher
// and leader on cluster changes, and the operators' decisions' refresh on
// pauses and cancel requests, on a connection of its own, reconnecting
// with backoff.
func (n *Node) listen(ctx context.Context, due, duties, leader, pause, cancel chan<- struct{}) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := n.listenOnce(ctx, due, duties, leader, pause, cancel)
		if ctx.Err() != nil {
			return
		}
		n.cfg.Logger.Warn("listening for notifications failed; polling until reconnected", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (n *Node) listenOnce(ctx context.Context, due, duties, leader, pause, cancel chan<- struct{}) error {
	conn, err := pgx.ConnectConfig(ctx, n.cfg.Pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	assign, paused, cancels := n.store.AssignChannel(), n.store.PauseChannel(), n.store.CancelChannel()
	for _, ch := range []string{n.store.NotifyChannel(), assign, paused, cancels} {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
	}
	// Whatever happened while not listening: look now.
	for _, ch := range []chan<- struct{}{duties, leader, due, pause, cancel} {
		poke(ch)
	}
	for {
		note, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		switch note.Channel {
		case assign:
			poke(duties)
			poke(leader)
		case paused:
			poke(pause)
		case cancels:
			poke(cancel)
		default:
			poke(due)
		}
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

// maintain keeps the node's copy of the operators' decisions current (at
// once on NOTIFY, else every maintenance interval), and each maintenance
// round runs every node's duties and refreshes the cluster, pending and
// set-aside schedule gauges. The leader's duties run in its round
// (internal/lease, internal/maintenance).
func (n *Node) maintain(ctx context.Context, p *parts) {
	tick := time.NewTicker(n.cfg.MaintenanceInterval)
	defer tick.Stop()
	m, st := n.cfg.Metrics, n.store
	rounds := 0
	n.control.RefreshPaused(ctx, p.disp)
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.pauseWake:
			n.control.RefreshPaused(ctx, p.disp)
			continue
		case <-p.cancelWake:
			n.control.RefreshCancels(ctx, p.disp)
			continue
		case <-tick.C:
		}
		n.control.RefreshPaused(ctx, p.disp)
		n.control.RefreshCancels(ctx, p.disp)
		n.logReadiness(p)
		if p.lease.Current() == nil {
			continue
		}
		if active, inactive, err := st.NodeCounts(ctx, n.ctl); err == nil {
			m.NodesActive.Set(float64(active))
			m.NodesInactive.Set(float64(inactive))
		}
		p.nodeDuties.runner.Round(ctx, lease.Leadership{})
		// The leader counts per kind every few seconds; reading its count
		// every tenth round is fresh enough. Schedules change state rarer
		// still.
		if rounds++; rounds%10 == 1 {
			if counts, err := st.KindsCounted(ctx, n.ctl); err == nil {
				setKindCounts(m, counts)
			}
			if k, err := st.RecurringSetAsideCount(ctx, n.ctl); err == nil {
				m.RecurringSetAside.Set(float64(k))
			}
		}
	}
}

// logReadiness logs when outcomes begin or stop being stuck for longer
// than the lease TTL, the state the worker's readiness reports.
func (n *Node) logReadiness(p *parts) {
	d, k, err := p.disp.Unrecorded()
	stuck := d > n.cfg.LeaseTTL
	if stuck == n.outcomesStuck {
		return
	}
	n.outcomesStuck = stuck
	if stuck {
		n.cfg.Logger.Error("task outcomes cannot be recorded; reporting not ready", "tasks", k, "for", d.Round(time.Millisecond), "error", err)
		return
	}
	n.cfg.Logger.Info("task outcomes are recorded again; ready")
}

// setKindCounts exports the leader's last count: the pending total and
// the per-kind depth and wait.
func setKindCounts(m *metrics.Metrics, counts []store.KindCount) {
	var pending int64
	kc := make([]metrics.KindCount, len(counts))
	for i, c := range counts {
		pending += c.Pending
		kc[i] = metrics.KindCount(c)
	}
	m.Pending.Set(float64(pending))
	m.KindCounts.Set(kc)
}
