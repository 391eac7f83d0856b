package maintenance

import (
	"context"

	"github.com/pgsched/pgsched/internal/lease"
	"github.com/pgsched/pgsched/internal/recurring"
)

// Recurring creates the ticks of the recurring schedules due within the
// materializer's horizon (see internal/recurring).
type Recurring struct {
	Materializer *recurring.Materializer
}

func (r *Recurring) Name() string { return "recurring ticks" }

func (r *Recurring) Round(ctx context.Context, _ lease.Leadership) error {
	return r.Materializer.Round(ctx)
}
