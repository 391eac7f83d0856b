package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/pgsched/pgsched/internal/lease"
	"github.com/pgsched/pgsched/internal/store"
)

// Deplete removes the nodes whose lease ended more than FlexDown ago: their
// running tasks go back and their rows are deleted, so the plan gives their
// partitions to live nodes. Fenced on the leader's lease.
type Deplete struct {
	Store    store.Store
	DB       store.DBTX
	FlexDown time.Duration
	Logger   *slog.Logger
	// Depleted is told of the nodes removed (metrics). May be nil.
	Depleted func(nodes []string)
}

func (d *Deplete) Name() string { return "deplete" }

func (d *Deplete) Round(ctx context.Context, l lease.Leadership) error {
	gone, err := d.Store.Deplete(ctx, d.DB, l.NodeID, l.Epoch, d.FlexDown)
	if err != nil {
		return err
	}
	for _, id := range gone {
		d.Logger.Info("node depleted", "depleted_node_id", id, "flex_down", d.FlexDown)
	}
	if len(gone) > 0 && d.Depleted != nil {
		d.Depleted(gone)
	}
	return nil
}
