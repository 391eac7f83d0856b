package maintenance

import (
	"context"
	"log/slog"

	"github.com/pgsched/pgsched/internal/lease"
	"github.com/pgsched/pgsched/internal/store"
)

// Completions creates the completion partitions of the next days ahead and
// drops those older than the retention window, whole (no mass DELETE).
type Completions struct {
	Store  store.Store
	DB     store.DBTX
	Logger *slog.Logger
}

func (c *Completions) Name() string { return "completion partitions" }

func (c *Completions) Round(ctx context.Context, _ lease.Leadership) error {
	dropped, err := c.Store.EnsureCompletionPartitions(ctx, c.DB, 3)
	if err != nil {
		return err
	}
	if dropped > 0 {
		c.Logger.Info("dropped expired completion partitions", "partitions", dropped)
	}
	return nil
}
