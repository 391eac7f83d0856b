package dispatch

import (
	"context"
	"time"

	"github.com/pgsched/pgsched/internal/lease"
	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedtype"
)

// untrack forgets jobs whose outcome is settled, unless a newer job of
// the same task (claimed again since) has taken their place.
func (d *Dispatcher) untrack(jobs []*Job) {
	d.knownMu.Lock()
	for _, j := range jobs {
		if d.known[j.ID] == j {
			delete(d.known, j.ID)
		}
	}
	d.knownMu.Unlock()
}

// statementFailed notes that a claim or finish statement failed: the
// server may have committed it all the same (a connection lost, a timeout
// racing the commit), leaving tasks running under this node's term that
// the node never heard of.
func (d *Dispatcher) statementFailed() { d.failedAt.Store(time.Now().UnixNano()) }

// reconcile gives back the tasks the database says this node's term runs
// but the node does not know of: those a claim or a finish handed over in
// a statement whose response was lost after it committed. Nobody else
// would ever run them while the lease lives. It runs in the claim loop, so
// no claim is in flight, and holds off outcome statements while it reads,
// so every task a finish handed over is known by then.
func (d *Dispatcher) reconcile(ctx context.Context, term *lease.Term) error {
	ctx, cancel := context.WithTimeout(ctx, statementTimeout)
	defer cancel()
	node := d.cfg.Node.ID()
	d.writing.Lock()
	held, err := d.cfg.Store.HeldBy(ctx, d.cfg.DB, node, term.Epoch)
	var lost []store.Outcome
	if err == nil {
		d.knownMu.Lock()
		for _, h := range held {
			if j, ok := d.known[h.ID]; !ok || j.Epoch != term.Epoch {
				lost = append(lost, store.Outcome{Partition: h.Partition, OrderingID: h.OrderingID, ID: h.ID,
					ClaimedAt: h.ClaimedAt, Outcome: pgschedtype.OutcomeRelease})
			}
		}
		d.knownMu.Unlock()
	}
	d.writing.Unlock()
	if err != nil || len(lost) == 0 {
		return err
	}
	res, err := d.cfg.Store.Finish(ctx, d.cfg.DB, node, term.Epoch, lost, store.Handover{})
	if err != nil {
		d.statementFailed()
		return err
	}
	d.cfg.Logger.Warn("gave back tasks the database said this node ran but it did not know of (a response lost after its statement committed)",
		"epoch", term.Epoch, "tasks", len(res.Applied))
	if f := d.cfg.Hooks.Reconciled; f != nil {
		f(len(res.Applied))
	}
	d.outcomesWritten()
	return nil
}
