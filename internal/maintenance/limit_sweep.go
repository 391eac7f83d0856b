package maintenance

import (
	"context"
	"log/slog"

	"github.com/pgsched/pgsched/internal/lease"
	"github.com/pgsched/pgsched/internal/store"
)

// LimitSweep parks the heads of limited kinds written unparked around a
// set_limit, and unparks those of kinds no longer limited
// (pgsched.limit_sweep), so claims find a limited kind's tasks where they
// look for them.
type LimitSweep struct {
	Store  store.Store
	DB     store.DBTX
	Logger *slog.Logger
}

func (l *LimitSweep) Name() string { return "limit sweep" }

func (l *LimitSweep) Round(ctx context.Context, _ lease.Leadership) error {
	n, err := l.Store.LimitSweep(ctx, l.DB)
	if err != nil {
		return err
	}
	if n > 0 {
		l.Logger.Debug("parked or unparked heads of limited kinds", "heads", n)
	}
	return nil
}
