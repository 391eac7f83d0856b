package store

import (
	"context"
	"time"
)

// Store is pgsched's storage: every statement the engine, the client and
// the console run, in one schema. PG runs them on one PostgreSQL; Citus on
// a schema distributed over Citus, where a worker node's claims, outcomes
// and due reads go to the Citus workers holding the partitions. Open picks
// the one a schema needs; internal/store/storetest is the suite both must
// pass.
type Store interface {
	// The schema
	Schema() string
	SchemaVersion(ctx context.Context, db DBTX) (int64, error)
	Settings(ctx context.Context, db DBTX) (Settings, error)
	NotifyChannel() string
	EnsureCompletionPartitions(ctx context.Context, db DBTX, daysAhead int) (int, error)

	// Enqueueing and changing tasks (clients)
	ScheduleMany(ctx context.Context, db DBTX, tasks []NewTask, newKeys bool) ([]string, error)
	Cancel(ctx context.Context, db DBTX, orderingID string, scheduledAt time.Time, uniquenessKey string) error
	Reschedule(ctx context.Context, db DBTX, orderingID string, scheduledAt time.Time, uniquenessKey string, newAt time.Time) error
	ListTasks(ctx context.Context, db DBTX, f TaskFilter) ([]Listed, error)
	NotifyDue(ctx context.Context, db DBTX) error

	// Running tasks (a worker node's claims and outcomes)
	Claim(ctx context.Context, db DBTX, node string, epoch int64, partitions []int32, max int, ahead time.Duration) ([]Claimed, error)
	ClaimFrom(ctx context.Context, db DBTX, node string, epoch int64, partitions, served []int32, max int, ahead time.Duration) (jobs []Claimed, unreached []int32, err error)
	Finish(ctx context.Context, db DBTX, node string, epoch int64, outs []Outcome, hand Handover) (Finished, error)
	TaskOutput(ctx context.Context, db DBTX, orderingID string, scheduledAt time.Time, uniquenessKey string) ([]byte, error)
	NextDue(ctx context.Context, db DBTX, partitions []int32) ([]DuePartition, error)
	HeldBy(ctx context.Context, db DBTX, node string, epoch int64) ([]Held, error)
	RescueExpired(ctx context.Context, db DBTX, nodes []string) (int, error)
	RescueOrphaned(ctx context.Context, db DBTX) (int, error)

	// Node leases, the leader and the plan
	NodeRegister(ctx context.Context, db DBTX, nodeID, instance string, ttl time.Duration, host string, pid int, leaving bool, afterEpoch int64) (Registration, error)
	NodeRenew(ctx context.Context, db DBTX, nodeID string, epoch int64, ttl time.Duration) (time.Time, error)
	NodeLeave(ctx context.Context, db DBTX, nodeID string, epoch int64) error
	NodeDeregister(ctx context.Context, db DBTX, nodeID string, epoch int64) error
	NodeCounts(ctx context.Context, db DBTX) (active, inactive int, err error)
	NotifyCluster(ctx context.Context, db DBTX) error
	LeaderAcquire(ctx context.Context, db DBTX, nodeID string, epoch int64, ttl time.Duration) (int64, error)
	LeaderResign(ctx context.Context, db DBTX, nodeID string, epoch int64) (bool, error)
	Assign(ctx context.Context, db DBTX, nodeID string, epoch int64, owners []string, backups map[string]string) (bool, error)
	AssignChannel() string
	Members(ctx context.Context, db DBTX) ([]Member, error)
	PartitionOwners(ctx context.Context, db DBTX) ([]string, error)
	Backups(ctx context.Context, db DBTX) (map[string]string, error)
	BackedUp(ctx context.Context, db DBTX, nodeID string) (map[string]time.Duration, error)
	Duties(ctx context.Context, db DBTX, nodeID string) ([]Duty, error)
	StandIns(ctx context.Context, db DBTX, nodeID string) ([]string, error)
	ExpiredUnserved(ctx context.Context, db DBTX) ([]string, error)
	Deplete(ctx context.Context, db DBTX, nodeID string, epoch int64, flexDown time.Duration) ([]string, error)

	// Operator actions
	PauseKind(ctx context.Context, db DBTX, kind string) (bool, error)
	ResumeKind(ctx context.Context, db DBTX, kind string) (bool, error)
	PausedKinds(ctx context.Context, db DBTX) ([]PausedKind, error)
	PauseChannel() string
	PauseSweep(ctx context.Context, db DBTX) (int, error)
	SetLimit(ctx context.Context, db DBTX, kind string, l Limit) (bool, error)
	ClearLimit(ctx context.Context, db DBTX, kind string) (bool, error)
	Limits(ctx context.Context, db DBTX) ([]LimitInfo, error)
	LimitSweep(ctx context.Context, db DBTX) (int, error)
	SetGroupWeight(ctx context.Context, db DBTX, kind, group string, weight int) (int, error)
	GroupWeights(ctx context.Context, db DBTX) ([]GroupWeight, error)
	CancelRunning(ctx context.Context, db DBTX, orderingID string, scheduledAt time.Time, uniquenessKey string) (bool, error)
	CancelRequests(ctx context.Context, db DBTX) ([]int64, error)
	CancelChannel() string
	PruneCancelRequests(ctx context.Context, db DBTX) (int, error)
	RetryDead(ctx context.Context, db DBTX, id int64) (int, error)
	RetryDeadWhere(ctx context.Context, db DBTX, f DeadFilter) (int, error)
	DeleteDead(ctx context.Context, db DBTX, id int64) (int, error)
	DeleteDeadWhere(ctx context.Context, db DBTX, f DeadFilter) (int, error)

	// Recurring schedules
	RecurringUpsert(ctx context.Context, db DBTX, d RecurringDef) (string, error)
	RecurringPause(ctx context.Context, db DBTX, name string) (bool, error)
	RecurringResume(ctx context.Context, db DBTX, name string) (bool, error)
	RecurringDelete(ctx context.Context, db DBTX, name string) (bool, error)
	RecurringList(ctx context.Context, db DBTX) ([]RecurringInfo, error)
	RecurringPaused(ctx context.Context, db DBTX) ([]string, error)
	RecurringDueWithin(ctx context.Context, db DBTX, horizon time.Duration, max int) ([]RecurringDue, error)
	RecurringMaterialize(ctx context.Context, db DBTX, name string, expected *time.Time, next time.Time, ticks []time.Time) (int, error)
	RecurringSetAside(ctx context.Context, db DBTX, failed []RecurringFailure, min, max time.Duration) ([]RecurringSetAsideRow, error)
	RecurringSetAsideCount(ctx context.Context, db DBTX) (int, error)

	// Counts, history and the console
	CountKinds(ctx context.Context, db DBTX) (int, error)
	KindsCounted(ctx context.Context, db DBTX) ([]KindCount, error)
	LastCounted(ctx context.Context, db DBTX) (c Counted, ok bool, err error)
	AddStats(ctx context.Context, db DBTX, node string, st Stats) error
	PruneStats(ctx context.Context, db DBTX) (int64, error)
	StatsHour(ctx context.Context, db DBTX) ([]StatsMinute, error)
	ConsoleNow(ctx context.Context, db DBTX) (time.Time, error)
	ConsoleNodes(ctx context.Context, db DBTX) ([]ConsoleNode, error)
	ConsolePartitions(ctx context.Context, db DBTX) ([]ConsolePartition, error)
	ConsoleKinds(ctx context.Context, db DBTX) ([]ConsoleKind, error)
	ConsoleLateness(ctx context.Context, db DBTX) (float64, error)
	ConsoleTasks(ctx context.Context, db DBTX, orderingID, kind, state string, max int) ([]Listed, error)
	ConsoleTaskKey(ctx context.Context, db DBTX, k Key) ([]ConsoleKeyRow, error)
	ConsoleDead(ctx context.Context, db DBTX, kind string, max int) ([]ConsoleDead, error)
	ConsoleDeadTask(ctx context.Context, db DBTX, id int64) ([]ConsoleDeadTask, error)

	// The operator CLI's reads, over the views only
	CLIKinds(ctx context.Context, db DBTX) ([]CLIKind, error)
	CLIKindLag(ctx context.Context, db DBTX) ([]CLIKindLag, error)
	CLITasks(ctx context.Context, db DBTX, kind, state, orderingID string, max int) ([]Listed, error)
	CLITaskFind(ctx context.Context, db DBTX, id int64, hasID bool, key, orderingID string) ([]CLIFound, error)
	CLIDead(ctx context.Context, db DBTX, id int64, f DeadFilter, max int) ([]CLIDead, error)
}

var (
	_ Store = (*PG)(nil)
	_ Store = (*Citus)(nil)
)
