package pgsched

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgsched/pgsched/pgschedtype"
)

// The defaults of WorkerConfig's fields, in one place: NewWorker fills them
// in and cmd/worker uses them for its flags.
const (
	DefaultConcurrency   = 100
	DefaultLeaseTTL      = 10 * time.Second
	DefaultClaimAhead    = 25 * time.Millisecond
	DefaultPollInterval  = time.Second
	DefaultDrainTimeout  = 10 * time.Second
	DefaultFlexDown      = time.Minute
	DefaultCountInterval = 10 * time.Second
	DefaultFinishBatch   = 1000
	DefaultFinishDelay   = time.Millisecond
	// DefaultMaxOutputBytes bounds a handler's output unless
	// WorkerConfig.MaxOutputBytes says otherwise.
	DefaultMaxOutputBytes = 64 << 10
)

// The largest Concurrency and Prefetch a WorkerConfig may have. One node
// runs that many handlers and holds that many more claimed tasks; more
// work calls for more nodes, not a bigger claim statement. Outputs are
// kept with completions, in the finish batches' statements: small ones.
const (
	MaxConcurrency = 10_000
	MaxPrefetch    = 10_000
	// MaxOutputBytes is the largest output Job.RecordOutput keeps.
	MaxOutputBytes = pgschedtype.MaxOutputBytes
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// Schema holds pgsched's tables; it must match the one migrated.
	// Defaults to "pgsched".
	Schema string
	// Registerer receives pgsched_tasks_scheduled_total. Defaults to none.
	Registerer prometheus.Registerer
	// Tracer, when set, stores the trace context of each enqueueing call's
	// ctx with its tasks (docs/tracing.md). Nil: none stored.
	Tracer Tracer
}

// WorkerConfig configures a Worker.
type WorkerConfig struct {
	// Schema holds pgsched's tables; it must match the one migrated.
	// Defaults to "pgsched".
	Schema string

	// Handlers maps a task kind to its handler, TxHandlers to a handler
	// that runs in the transaction recording its completion; a kind is in
	// one of them at most. The kind "*" catches every kind without its own.
	// A task whose kind has no handler fails and is retried or dead per
	// Retry, never dropped.
	Handlers   map[string]Handler
	TxHandlers map[string]TxHandler
	// Retry is the policy for kinds not in KindRetry. Defaults to retrying
	// forever with backoff from 1s to 5m.
	Retry     RetryPolicy
	KindRetry map[string]RetryPolicy

	// Recurring schedules are created or updated at Start (as
	// Client.UpsertRecurring does), so a program declares its recurring
	// work where it declares its handlers. Schedules not listed are left
	// as they are: delete them with Client.DeleteRecurring.
	Recurring []Recurring

	// NodeID names this worker node. Defaults to host name and pid.
	NodeID string
	// Concurrency is how many tasks run at once on this node, at most
	// MaxConcurrency (10000). Defaults to DefaultConcurrency (100).
	Concurrency int
	// Prefetch is how many claimed tasks may wait on this node for a free
	// handler beyond Concurrency, so claims (one commit each) stay large
	// while handlers are busy. A prefetched task counts as running (it can
	// no longer be cancelled or rescheduled) and, if the node stops before
	// starting it, goes back at once. Tasks come only from this node's own
	// partitions, so no other node could have run them sooner. At most
	// MaxPrefetch (10000); 0 defaults to Concurrency; negative disables.
	Prefetch int
	// LeaseTTL is how long the node's lease lasts without renewal; renewed
	// every third of it. Defaults to 10s.
	LeaseTTL time.Duration
	// ClaimAhead claims tasks due within this much of now and starts each
	// exactly when due, so a claim's round trip and commit are not part of
	// start lateness. A task claimed ahead counts as running from its claim:
	// in that last moment before its time it can no longer be cancelled or
	// rescheduled (ErrTaskRunning). Defaults to 25ms; negative claims only
	// due tasks; at most 1s.
	ClaimAhead time.Duration
	// PollInterval is the fallback check for due work when no notification
	// or timer fires. Defaults to 1s.
	PollInterval time.Duration
	// MaintenanceInterval is how often the node refreshes its cluster and
	// pending gauges and adds its outcomes to the throughput history
	// (pgsched.throughput). Defaults to LeaseTTL/4.
	MaintenanceInterval time.Duration
	// CountInterval is how often the leader counts tasks per kind for the
	// console, the pgsched.kinds view and the pending gauge; a count that
	// takes long (millions of tasks) stretches it to 20 times the count's
	// duration. A node that starts to lead counts one interval later (the
	// last leader's counts stay readable until then). Defaults to 10s.
	CountInterval time.Duration
	// ClusterInterval is how often a node re-reads its partition duties,
	// competes for (or renews) the leader lease and, when leading, plans
	// partitions and backups. Notifications make most changes travel
	// faster; a stand-in also looks again the moment the lease of a node it
	// backs up would run out. Defaults to min(LeaseTTL/3, 1s).
	ClusterInterval time.Duration
	// DrainTimeout is how long Stop waits for running handlers before
	// cancelling them and giving their tasks back. Defaults to 10s.
	DrainTimeout time.Duration
	// FlexDown is how long a node may stay down (its backup standing in)
	// before the leader gives its partitions to live nodes and removes its
	// row. Defaults to 60s.
	FlexDown time.Duration
	// FinishBatch and FinishDelay tune outcome batching. Default 1000 and 1ms.
	FinishBatch int
	FinishDelay time.Duration
	// MaxOutputBytes bounds the output a handler may record with
	// Job.RecordOutput; a run whose output is larger fails for good (the
	// task is dead, with the sizes in its error). Defaults to
	// DefaultMaxOutputBytes (64 KiB); at most MaxOutputBytes (1 MiB).
	MaxOutputBytes int

	// Logger receives state transitions. Defaults to discarding.
	Logger *slog.Logger
	// Registerer receives the worker's metrics. Defaults to none.
	Registerer prometheus.Registerer
	// Tracer, when set, runs each handler in a span linked to its task's
	// enqueueing call and gives claims and outcome batches spans of their
	// own (docs/tracing.md; pgschedotel implements it with
	// OpenTelemetry). Nil: no tracing, at no cost.
	Tracer Tracer

	// onOutcome sees every outcome this worker records (tests set it
	// through export_test.go, to wait on events instead of polling).
	onOutcome func(Outcome)
}

// Outcome is how one run of a task ended, once recorded: completed,
// retry, dead, release, or fenced (not recorded: the node no longer held
// the task).
type Outcome struct {
	Key     Key
	ID      int64
	Kind    string
	Attempt int
	Result  pgschedtype.Outcome
}

// RetryPolicy says how a failing kind is retried (see
// pgschedtype.RetryPolicy).
type RetryPolicy = pgschedtype.RetryPolicy
