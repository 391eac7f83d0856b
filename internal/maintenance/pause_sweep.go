package maintenance

import (
	"context"
	"log/slog"

	"github.com/pgsched/pgsched/internal/lease"
	"github.com/pgsched/pgsched/internal/store"
)

// PauseSweep marks the heads of paused kinds written since their pause
// (pgsched.pause_sweep), so claims skip them by index rather than by
// filter.
type PauseSweep struct {
	Store  store.Store
	DB     store.DBTX
	Logger *slog.Logger
}

func (p *PauseSweep) Name() string { return "pause sweep" }

func (p *PauseSweep) Round(ctx context.Context, _ lease.Leadership) error {
	n, err := p.Store.PauseSweep(ctx, p.DB)
	if err != nil {
		return err
	}
	if n > 0 {
		p.Logger.Debug("marked heads of paused kinds", "heads", n)
	}
	return nil
}
