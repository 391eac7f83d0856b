package lease

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"

	"github.com/pgsched/pgsched/internal/store"
)

// PlannerConfig configures a Planner.
type PlannerConfig struct {
	Store  store.Store
	DB     store.DBTX
	Logger *slog.Logger
}

// Planner is the leader's plan: partitions and backups assigned over the
// member nodes, written only when they change (internal/maintenance runs
// it in the leader's round, after the nodes gone past the flex-down
// window are depleted).
//
// Members are all registered nodes, live or not, except those leaving: a
// down node keeps its partitions (its stand-in serves them) until it is
// depleted, so a node that comes back inside the window finds its
// partitions waiting; a node stopping cleanly gives them up at once.
type Planner struct {
	cfg PlannerConfig
}

// NewPlanner validates cfg and returns a Planner.
func NewPlanner(cfg PlannerConfig) (*Planner, error) {
	if cfg.Store == nil || cfg.DB == nil {
		return nil, errors.New("lease: planner needs a store and a db")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Planner{cfg: cfg}, nil
}

// Name says what the planner does, for the maintenance runner's logs.
func (p *Planner) Name() string { return "plan" }

// Round assigns partitions and backups over the members under l, fenced
// on l's leader lease.
func (p *Planner) Round(ctx context.Context, l Leadership) error {
	st, db := p.cfg.Store, p.cfg.DB
	members, err := st.Members(ctx, db)
	if err != nil {
		return err
	}
	// A leaving node drains what it runs but owns nothing more: planning
	// without it hands its partitions to the others at once.
	ids := make([]string, 0, len(members))
	for _, m := range members {
		if !m.Leaving {
			ids = append(ids, m.ID)
		}
	}
	owners, err := st.PartitionOwners(ctx, db)
	if err != nil {
		return err
	}
	backups, err := st.Backups(ctx, db)
	if err != nil {
		return err
	}
	nextOwners := AssignPartitions(owners, ids)
	nextBackups := AssignBackups(backups, ids)
	if slices.Equal(owners, nextOwners) && maps.Equal(backups, nextBackups) {
		return nil
	}
	ok, err := st.Assign(ctx, db, l.NodeID, l.Epoch, nextOwners, nextBackups)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("no longer the leader; assignment not written")
	}
	moves := Moves(owners, nextOwners)
	p.cfg.Logger.Info("partitions assigned", "term", l.Term, "members", len(ids), "moves", moves,
		"backups_changed", changedBackups(backups, nextBackups))
	return nil
}

func changedBackups(prev, next map[string]string) int {
	n := 0
	for k, v := range next {
		if prev[k] != v {
			n++
		}
	}
	for k := range prev {
		if _, ok := next[k]; !ok {
			n++
		}
	}
	return n
}
