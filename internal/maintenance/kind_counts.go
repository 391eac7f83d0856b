package maintenance

import (
	"context"

	"github.com/pgsched/pgsched/internal/stats"
)

// KindCounts recounts tasks per kind (pgsched.kinds, the console's and the
// pending gauge's numbers) while the node leads, beside the rounds: a
// count reads every task, and over tens of millions it takes longer than
// a lease, which the round must renew. See stats.Counter.
type KindCounts struct {
	Counter *stats.Counter
	// Leading reports whether the node leads now.
	Leading func() bool
}

func (k *KindCounts) Name() string { return "kind counts" }

func (k *KindCounts) Loop(ctx context.Context) { k.Counter.Run(ctx, k.Leading) }
