package node

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsched/pgsched/internal/control"
	"github.com/pgsched/pgsched/internal/dispatch"
	"github.com/pgsched/pgsched/internal/execute"
	"github.com/pgsched/pgsched/internal/lease"
	"github.com/pgsched/pgsched/internal/maintenance"
	"github.com/pgsched/pgsched/internal/recurring"
	"github.com/pgsched/pgsched/internal/stats"
)

// maintenanceRunners are the periodic duties of one kind of round: the
// leader's, or every node's.
type maintenanceRunners struct {
	runner *maintenance.Runner
	flush  *maintenance.StatsFlush // nodes only: also run at the end
}

// build makes the run's components on the control pool. It starts nothing.
func (n *Node) build(partitionCount int) (*parts, error) {
	cfg, m, st, ctl := n.cfg, n.cfg.Metrics, n.store, n.ctl
	// The kinds this node has handlers for label themselves in every
	// per-kind metric, whatever kinds the counts or tasks show first.
	kinds := make([]string, 0, len(cfg.Kinds))
	for k := range cfg.Kinds {
		if k != "*" {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		m.Kinds.Label(k)
	}
	p := &parts{wake: make(chan struct{}, 1), dutiesWake: make(chan struct{}, 1), leaderWake: make(chan struct{}, 1),
		pauseWake: make(chan struct{}, 1), cancelWake: make(chan struct{}, 1)}
	var err error
	p.lease, err = lease.NewNode(lease.NodeConfig{
		ID: cfg.NodeID, Store: st, DB: ctl, TTL: cfg.LeaseTTL, Host: hostname(), PID: os.Getpid(),
		Logger: cfg.Logger,
		Events: lease.Events{
			Registered: func(epoch int64) { m.LeaseEpoch.Set(float64(epoch)) },
			Renewed:    func() { m.LeaseRenewed.Inc() },
			Lost: func(int64, string) {
				m.LeaseLost.Inc()
				m.LeaseEpoch.Set(0)
			},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("pgsched: %w", err)
	}
	p.duties, err = lease.NewDuties(lease.DutiesConfig{
		Node: p.lease, Store: st, DB: ctl, Interval: cfg.ClusterInterval, Wake: p.dutiesWake,
		OnChange: func() { poke(p.wake) },
		OnRescue: func(k int) { m.Rescued.Add(float64(k)) },
		OnState: func(s lease.DutiesState) {
			m.Partitions.Set(float64(s.Owned))
			m.PartitionsServed.Set(float64(s.Served))
			m.StandInsActive.Set(float64(len(s.StandIns)))
			m.BackupAssignments.Set(float64(s.BackupOf))
		},
		Logger: cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("pgsched: %w", err)
	}
	if p.leaderDuties, err = n.leaderDuties(p); err != nil {
		return nil, err
	}
	p.nodeDuties = n.nodeDuties()
	p.leader, err = lease.NewLeader(lease.LeaderConfig{
		Node: p.lease, Store: st, DB: ctl, TTL: cfg.LeaseTTL, Interval: cfg.ClusterInterval, Wake: p.leaderWake,
		Round:  p.leaderDuties.runner.Round,
		Logger: cfg.Logger,
		Events: lease.LeaderEvents{
			Won: func(int64) {
				m.LeaderCurrent.Set(1)
				m.LeaderClaimed.Inc()
			},
			Refreshed: func(int64) { m.LeaderRefreshed.Inc() },
			Lost:      func(int64, string) { m.LeaderCurrent.Set(0) },
		},
	})
	if err != nil {
		return nil, fmt.Errorf("pgsched: %w", err)
	}
	n.control = &control.State{Store: st, DB: ctl, Logger: cfg.Logger,
		Events: control.Events{Paused: func(k int) { m.KindsPaused.Set(float64(k)) }}}
	observer := n.newObserver()
	var disp *dispatch.Dispatcher
	exec := execute.New(execute.Config{
		Kinds: cfg.Kinds, Retry: cfg.Retry, Pool: cfg.Pool, Started: observer.Started, MaxOutput: cfg.MaxOutput,
		Record: func(ctx context.Context, tx pgx.Tx, job *dispatch.Job, output []byte) (bool, error) {
			return disp.RecordCompletedTx(ctx, tx, job, output)
		},
	})
	disp, err = dispatch.New(dispatch.Config{
		Store: st, DB: ctl, Node: p.lease,
		Partitions:     p.duties.Partitions,
		PartitionCount: partitionCount,
		Concurrency:    cfg.Concurrency,
		Prefetch:       cfg.Prefetch,
		Exec:           exec.Run,
		Control:        n.control,
		Wake:           p.wake,
		PollInterval:   cfg.PollInterval,
		ClaimAhead:     cfg.ClaimAhead,
		FinishBatch:    cfg.FinishBatch,
		FinishDelay:    cfg.FinishDelay,
		DrainTimeout:   cfg.DrainTimeout,
		Logger:         cfg.Logger,
		Hooks:          observer.Hooks(),
		Tracer:         cfg.Tracer,
	})
	if err != nil {
		return nil, fmt.Errorf("pgsched: %w", err)
	}
	p.disp = disp
	n.mu.Lock()
	n.lease, n.disp = p.lease, disp
	n.mu.Unlock()
	return p, nil
}

// leaderDuties are the duties the leader's round runs, in order (see
// internal/maintenance), and the kind counts beside it.
func (n *Node) leaderDuties(p *parts) (*maintenanceRunners, error) {
	cfg, m, st, ctl, log := n.cfg, n.cfg.Metrics, n.store, n.ctl, n.cfg.Logger
	planner, err := lease.NewPlanner(lease.PlannerConfig{Store: st, DB: ctl, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("pgsched: %w", err)
	}
	// Two lease TTLs ahead: a leader's death and its successor's election
	// fit in that, so a failover makes no tick late, let alone missed.
	ticks := &recurring.Materializer{Store: st, DB: ctl, Horizon: max(2*cfg.LeaseTTL, 2*time.Second), Logger: log,
		Events: recurring.Events{
			Created: func(k, catchUps int) {
				m.RecurringTicks.WithLabelValues("on_time").Add(float64(k - catchUps))
				m.RecurringTicks.WithLabelValues("catch_up").Add(float64(catchUps))
			},
			Skipped: func(k int) { m.RecurringTicks.WithLabelValues("skipped").Add(float64(k)) },
		}}
	// The plan comes right after depletion: the rescue's sweep for orphans
	// (a new leader's first round, then once a minute) reads every head,
	// and the sweeps after it read the paused and parked ones, so a node
	// that joins a cluster with a large backlog waited for them all
	// before it had a partition to claim from.
	r := (&maintenance.Runner{Logger: log}).
		Add(&maintenance.Deplete{Store: st, DB: ctl, FlexDown: cfg.FlexDown, Logger: log,
			Depleted: func(nodes []string) { m.NodesDepleted.Add(float64(len(nodes))) }}, 0).
		Add(planner, 0).
		Add(&maintenance.Rescue{Store: st, DB: ctl, OrphansEvery: time.Minute, Logger: log,
			Rescued: func(k int) { m.Rescued.Add(float64(k)) }}, 0).
		Add(&maintenance.PauseSweep{Store: st, DB: ctl, Logger: log}, 5*time.Second).
		Add(&maintenance.LimitSweep{Store: st, DB: ctl, Logger: log}, 5*time.Second).
		Add(&maintenance.CancelPrune{Store: st, DB: ctl}, 5*time.Second).
		Add(&maintenance.Completions{Store: st, DB: ctl, Logger: log}, time.Hour).
		Add(&maintenance.Recurring{Materializer: ticks}, 0).
		AddLooper(&maintenance.KindCounts{
			Counter: &stats.Counter{Store: st, DB: ctl, Interval: cfg.CountInterval, Logger: log},
			Leading: func() bool { return p.leader.Current().Term != 0 },
		})
	return &maintenanceRunners{runner: r}, nil
}

// nodeDuties are the duties every node runs each maintenance round.
func (n *Node) nodeDuties() *maintenanceRunners {
	flush := &maintenance.StatsFlush{Store: n.store, DB: n.ctl, NodeID: n.cfg.NodeID, Stats: &n.stats}
	r := (&maintenance.Runner{Logger: n.cfg.Logger}).Add(flush, 0)
	return &maintenanceRunners{runner: r, flush: flush}
}
