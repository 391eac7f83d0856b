package maintenance

import (
	"context"

	"github.com/pgsched/pgsched/internal/lease"
	"github.com/pgsched/pgsched/internal/store"
)

// CancelPrune deletes the cancel requests of tasks that have ended.
type CancelPrune struct {
	Store store.Store
	DB    store.DBTX
}

func (c *CancelPrune) Name() string { return "cancel prune" }

func (c *CancelPrune) Round(ctx context.Context, _ lease.Leadership) error {
	_, err := c.Store.PruneCancelRequests(ctx, c.DB)
	return err
}
