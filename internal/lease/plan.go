package lease

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/pgsched/pgsched/internal/store"
)

// PlanEvents receives what the leader's rounds did (for metrics). Any field
// may be nil.
type PlanEvents struct {
	Depleted func(nodes []string)
	Rescued  func(tasks int)
}

// PlannerConfig configures a Planner.
type PlannerConfig struct {
	Store store.Store
	DB    store.DBTX
	// FlexDown is how long a node may stay down before the leader removes
	// it and gives its partitions to live nodes. Defaults to 60s.
	FlexDown time.Duration
	// CompletionsEvery is how often the leader creates completion
	// partitions ahead and drops expired ones. Defaults to 1h.
	CompletionsEvery time.Duration
	// OrphansEvery is how often the leader reads every running task for
	// any whose node's lease is not live (each round it only rescues the
	// expired nodes nobody stands in for). Defaults to 1m.
	OrphansEvery time.Duration
	// PauseSweepEvery is how often the leader marks heads of paused kinds
	// written since their pause (pgsched.pause_sweep) and deletes the
	// cancel requests of tasks that have ended. Defaults to 5s.
	PauseSweepEvery time.Duration
	Logger          *slog.Logger
	Events          PlanEvents
}

// Planner is the leader's round: deplete nodes gone past the flex-down
// window, give the running tasks of expired nodes back, assign partitions
// and backups over the member nodes, and keep completion partitions ahead.
//
// Members are all registered nodes, live or not, except those leaving: a
// down node keeps its partitions (its stand-in serves them) until it is
// depleted, so a node that comes back inside the window finds its
// partitions waiting; a node stopping cleanly gives them up at once.
type Planner struct {
	cfg             PlannerConfig
	lastCompletions time.Time
	lastOrphans     time.Time
	lastPauseSweep  time.Time
}

// NewPlanner validates cfg and returns a Planner.
func NewPlanner(cfg PlannerConfig) (*Planner, error) {
	if cfg.Store == nil || cfg.DB == nil {
		return nil, errors.New("lease: planner needs a store and a db")
	}
	if cfg.FlexDown <= 0 {
		cfg.FlexDown = time.Minute
	}
	if cfg.CompletionsEvery <= 0 {
		cfg.CompletionsEvery = time.Hour
	}
	if cfg.OrphansEvery <= 0 {
		cfg.OrphansEvery = time.Minute
	}
	if cfg.PauseSweepEvery <= 0 {
		cfg.PauseSweepEvery = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Planner{cfg: cfg}, nil
}

// Round runs one leader round under l. Failures are logged; the next round
// tries again.
func (p *Planner) Round(ctx context.Context, l Leadership) {
	if err := p.round(ctx, l); err != nil && ctx.Err() == nil {
		p.cfg.Logger.Warn("leader round failed", "term", l.Term, "error", err)
	}
}

func (p *Planner) round(ctx context.Context, l Leadership) error {
	st, db := p.cfg.Store, p.cfg.DB
	gone, err := st.Deplete(ctx, db, l.NodeID, l.Epoch, p.cfg.FlexDown)
	if err != nil {
		return err
	}
	for _, id := range gone {
		p.cfg.Logger.Info("node depleted", "depleted_node_id", id, "flex_down", p.cfg.FlexDown)
	}
	if len(gone) > 0 {
		if f := p.cfg.Events.Depleted; f != nil {
			f(gone)
		}
	}
	// Stand-ins give back the tasks of the nodes they serve at once; this
	// catches any expired node nobody stands in for, and now and then any
	// task whose node's lease is not live (a claim that committed just
	// after its node's stand-in looked, a node row deleted by hand).
	var rescued int
	if time.Since(p.lastOrphans) >= p.cfg.OrphansEvery {
		rescued, err = st.RescueOrphaned(ctx, db)
		if err == nil {
			p.lastOrphans = time.Now()
		}
	} else {
		var unserved []string
		unserved, err = st.ExpiredUnserved(ctx, db)
		if err == nil && len(unserved) > 0 {
			rescued, err = st.RescueExpired(ctx, db, unserved)
		}
	}
	if err != nil {
		return err
	}
	if rescued > 0 {
		p.cfg.Logger.Info("rescued running tasks of expired nodes", "tasks", rescued)
		if f := p.cfg.Events.Rescued; f != nil {
			f(rescued)
		}
	}

	if time.Since(p.lastPauseSweep) >= p.cfg.PauseSweepEvery {
		n, err := st.PauseSweep(ctx, db)
		if err != nil {
			return err
		}
		p.lastPauseSweep = time.Now()
		if n > 0 {
			p.cfg.Logger.Debug("marked heads of paused kinds", "heads", n)
		}
		if _, err := st.PruneCancelRequests(ctx, db); err != nil {
			return err
		}
	}

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
		return p.completions(ctx)
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
	return p.completions(ctx)
}

func (p *Planner) completions(ctx context.Context) error {
	if time.Since(p.lastCompletions) < p.cfg.CompletionsEvery {
		return nil
	}
	dropped, err := p.cfg.Store.EnsureCompletionPartitions(ctx, p.cfg.DB, 3)
	if err != nil {
		return err
	}
	p.lastCompletions = time.Now()
	if dropped > 0 {
		p.cfg.Logger.Info("dropped expired completion partitions", "partitions", dropped)
	}
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
