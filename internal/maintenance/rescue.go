package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/pgsched/pgsched/internal/lease"
	"github.com/pgsched/pgsched/internal/store"
)

// Rescue gives running tasks back to their ordering_ids when their node's
// lease is gone. Stand-ins give back the tasks of the nodes they serve at
// once (internal/lease); this catches any expired node nobody stands in
// for, each round, and every OrphansEvery any task whose node's lease is
// not live (a claim that committed just after its node's stand-in looked,
// a node row deleted by hand), which reads every running task.
type Rescue struct {
	Store        store.Store
	DB           store.DBTX
	OrphansEvery time.Duration
	Logger       *slog.Logger
	// Rescued is told how many tasks went back (metrics). May be nil.
	Rescued     func(tasks int)
	lastOrphans time.Time
}

func (r *Rescue) Name() string { return "rescue" }

func (r *Rescue) Round(ctx context.Context, _ lease.Leadership) error {
	var rescued int
	var err error
	if time.Since(r.lastOrphans) >= r.OrphansEvery {
		if rescued, err = r.Store.RescueOrphaned(ctx, r.DB); err == nil {
			r.lastOrphans = time.Now()
		}
	} else {
		var unserved []string
		unserved, err = r.Store.ExpiredUnserved(ctx, r.DB)
		if err == nil && len(unserved) > 0 {
			rescued, err = r.Store.RescueExpired(ctx, r.DB, unserved)
		}
	}
	if err != nil {
		return err
	}
	if rescued > 0 {
		r.Logger.Info("rescued running tasks of expired nodes", "tasks", rescued)
		if r.Rescued != nil {
			r.Rescued(rescued)
		}
	}
	return nil
}
