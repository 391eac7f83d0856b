// Package metrics holds pgsched's Prometheus collectors. Each worker
// registers its own set on the Registerer it is given, so tests (and
// programs embedding several workers) never collide on globals.
package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the collectors of one worker.
type Metrics struct {
	// Kinds bounds the kind label of Executed, Retried, Dead and Duration
	// (see MaxKinds); the four share it, so a kind has its own label in
	// all of them or in none.
	Kinds         *Kinds
	Executed      *KindCounterVec
	Retried       *KindCounterVec
	Dead          *KindCounterVec
	Claimed       prometheus.Counter
	HandedOver    prometheus.Counter
	Reconciled    prometheus.Counter
	Running       prometheus.Gauge
	Pending       prometheus.Gauge
	Lateness      prometheus.Histogram
	Duration      *KindHistogramVec
	Rescued       prometheus.Counter
	NodesActive   prometheus.Gauge
	NodesInactive prometheus.Gauge
	LeaseEpoch    prometheus.Gauge
	LeaseLost     prometheus.Counter
	LeaseRenewed  prometheus.Counter
	Partitions    prometheus.Gauge

	PartitionsServed  prometheus.Gauge
	LeaderCurrent     prometheus.Gauge
	LeaderClaimed     prometheus.Counter
	LeaderRefreshed   prometheus.Counter
	BackupAssignments prometheus.Gauge
	StandInsActive    prometheus.Gauge
	NodesDepleted     prometheus.Counter
	KindsPaused       prometheus.Gauge
	RecurringTicks    *prometheus.CounterVec
	RecurringLateness prometheus.Histogram
	RecurringSetAside prometheus.Gauge
	// BuildInfo is 1, labelled with the pgsched version and Go release
	// the worker runs: what a dashboard shows during a rolling upgrade.
	BuildInfo *prometheus.GaugeVec
	// KindCounts are the leader's last count per kind (queue depth and
	// wait), labelled by Kinds too.
	KindCounts *KindCounts
}

// kindHelp ends the help of every metric with a kind label.
var kindHelp = fmt.Sprintf(" The first %d distinct kinds a node sees are labelled with their names, later ones kind=%q.", MaxKinds, OtherKind)

// New creates the collectors and registers them on reg (nil: not registered).
func New(reg prometheus.Registerer) (*Metrics, error) {
	kinds := NewKinds(MaxKinds)
	m := &Metrics{
		Kinds: kinds,
		Executed: &KindCounterVec{kinds: kinds, vec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgsched_tasks_executed_total", Help: "Task runs by kind and result (completed, retry, dead, release, snooze; fenced: the outcome came after the node lost the task, and was not recorded)." + kindHelp,
		}, []string{"kind", "result"})},
		Retried: &KindCounterVec{kinds: kinds, vec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgsched_tasks_retried_total", Help: "Task runs that failed and were scheduled to retry." + kindHelp,
		}, []string{"kind"})},
		Dead: &KindCounterVec{kinds: kinds, vec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgsched_tasks_dead_total", Help: "Tasks that became dead (permanent failure or attempts exhausted)." + kindHelp,
		}, []string{"kind"})},
		Claimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgsched_tasks_claimed_total", Help: "Tasks claimed by this node.",
		}),
		HandedOver: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgsched_tasks_handed_over_total",
			Help: "Tasks started on this node by their predecessor's finish instead of a claim (also in pgsched_tasks_claimed_total).",
		}),
		Reconciled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgsched_tasks_reconciled_total",
			Help: "Tasks the database said this node ran but the node did not know of (a claim or finish whose response was lost after it committed), given back.",
		}),
		Running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pgsched_tasks_running", Help: "Tasks claimed by this node whose handlers have not returned.",
		}),
		Pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pgsched_tasks_pending", Help: "Pending tasks in the whole schema, as the leader last counted them.",
		}),
		KindCounts: newKindCounts(kinds),
		Lateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "pgsched_task_start_lateness_seconds", Help: "Claim time minus scheduled time for first attempts.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		Duration: &KindHistogramVec{kinds: kinds, vec: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "pgsched_task_run_duration_seconds", Help: "Handler run time by kind." + kindHelp,
			Buckets: prometheus.DefBuckets,
		}, []string{"kind"})},
		Rescued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgsched_tasks_rescued_total", Help: "Running tasks of nodes whose lease expired, given back to their ordering_ids by this node.",
		}),
		NodesActive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pgsched_nodes_active", Help: "Nodes with a live lease.",
		}),
		NodesInactive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pgsched_nodes_inactive", Help: "Registered nodes whose lease has expired.",
		}),
		LeaseEpoch: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pgsched_node_epoch", Help: "This node's current lease epoch (0 without a lease).",
		}),
		LeaseLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgsched_node_lease_lost_total", Help: "Times this node lost its lease.",
		}),
		LeaseRenewed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgsched_node_lease_renewed_total", Help: "Successful lease renewals of this node.",
		}),
		Partitions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pgsched_partitions_owned", Help: "Logical partitions the leader assigned to this node.",
		}),
		PartitionsServed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pgsched_partitions_served", Help: "Logical partitions this node claims from: owned plus those of down nodes it stands in for.",
		}),
		LeaderCurrent: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pgsched_leader_current", Help: "1 while this node holds the leader lease, else 0.",
		}),
		LeaderClaimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgsched_leader_claimed_total", Help: "Times this node took the leader lease.",
		}),
		LeaderRefreshed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgsched_leader_refreshed_total", Help: "Renewals of the leader lease by this node.",
		}),
		BackupAssignments: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pgsched_backup_assignments", Help: "Nodes this node is the backup of.",
		}),
		StandInsActive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pgsched_standins_active", Help: "Down nodes whose partitions this node serves now.",
		}),
		NodesDepleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgsched_nodes_depleted_total", Help: "Nodes this node, as leader, removed after the flex-down window.",
		}),
		KindsPaused: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pgsched_kinds_paused", Help: "Kinds paused cluster-wide (pgsched.pause_kind), as this node last read them.",
		}),
		RecurringTicks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgsched_recurring_ticks_total", Help: "Ticks of recurring schedules this node, as leader, created on time (on_time) or as catch-ups of missed ones (catch_up), and missed ticks it skipped under the schedule's policy (skipped).",
		}, []string{"type"}),
		RecurringLateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "pgsched_recurring_tick_lateness_seconds", Help: "Start time minus tick time of the recurring ticks this node ran, first attempts.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 60},
		}),
		RecurringSetAside: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pgsched_recurring_set_aside", Help: "Recurring schedules set aside cluster-wide because the leader cannot create their ticks (the recurring view's error column says why), as this node last read them.",
		}),
		BuildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pgsched_build_info", Help: "Always 1: the pgsched version and Go release this worker was built with, as labels.",
		}, []string{"version", "go_version"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.Executed, m.Retried, m.Dead, m.Claimed, m.HandedOver, m.Reconciled, m.Running, m.Pending, m.KindCounts,
			m.Lateness, m.Duration, m.Rescued, m.NodesActive, m.NodesInactive, m.LeaseEpoch, m.LeaseLost,
			m.LeaseRenewed, m.Partitions, m.PartitionsServed, m.LeaderCurrent, m.LeaderClaimed, m.LeaderRefreshed,
			m.BackupAssignments, m.StandInsActive, m.NodesDepleted, m.KindsPaused, m.RecurringTicks, m.RecurringLateness, m.RecurringSetAside, m.BuildInfo} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// Scheduled counts tasks a client enqueued, by result (inserted, updated,
// already_completed). Several clients may share reg: they share the
// counter.
func Scheduled(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pgsched_tasks_scheduled_total", Help: "Tasks enqueued by this process's clients and committed, by result.",
	}, []string{"result"})
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return existing, nil
			}
		}
		return nil, err
	}
	return c, nil
}
