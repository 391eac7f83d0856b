package maintenance

import (
	"context"
	"time"

	"github.com/pgsched/pgsched/internal/lease"
	"github.com/pgsched/pgsched/internal/stats"
	"github.com/pgsched/pgsched/internal/store"
)

// flushTimeout bounds a write of the throughput history, which a stop
// does not cancel half-way.
const flushTimeout = 2 * time.Second

// StatsFlush adds a node's outcomes and start lateness since the last
// flush to the throughput history (its row for the current minute). Every
// node runs it, leader or not.
type StatsFlush struct {
	Store  store.Store
	DB     store.DBTX
	NodeID string
	Stats  *stats.Recorder
}

func (s *StatsFlush) Name() string { return "throughput history" }

// Round flushes, never cancelled half-way by a stop: a flush the server
// commits while the client gives up would be added again by the next one.
func (s *StatsFlush) Round(ctx context.Context, _ lease.Leadership) error {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	return s.Stats.Flush(fctx, s.Store, s.DB, s.NodeID)
}
