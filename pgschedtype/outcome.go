package pgschedtype

// Outcome is what became of one run of a task. The same words are what
// pgsched.finish_tasks takes and what the pgsched_tasks_executed_total
// metric's result label says.
type Outcome string

// The outcomes of a run.
const (
	// OutcomeCompleted: the handler succeeded; the task left the pending
	// set and its key is remembered for the retention window.
	OutcomeCompleted Outcome = "completed"
	// OutcomeRetry: the handler failed; the task is pending again after a
	// backoff.
	OutcomeRetry Outcome = "retry"
	// OutcomeDead: the handler failed for good (a permanent failure, the
	// attempts used up, or an operator cancelled it): the task moved to
	// dead_tasks.
	OutcomeDead Outcome = "dead"
	// OutcomeRelease: the node gave the task back unrun or cut short (a
	// stop, a paused kind, a term that ended): pending again at once,
	// without using an attempt.
	OutcomeRelease Outcome = "release"
	// OutcomeSnooze: the handler asked to run the task again later
	// (pgsched.Snooze): pending again after its delay, without using an
	// attempt; its ordering_id's later tasks wait behind it.
	OutcomeSnooze Outcome = "snooze"
	// OutcomeFenced: not recorded, as the node no longer held the task
	// when its outcome was written (its term ended; another node may run
	// it). Never written to the database.
	OutcomeFenced Outcome = "fenced"
)

// State is where a task stands; the pgsched.tasks view's state column and
// the console use the same words.
type State string

// The states of a task.
const (
	// StatePending: waiting to run (due or not), as its ordering_id's head
	// or behind it.
	StatePending State = "pending"
	// StateRunning: claimed by a node, whose handler runs it or soon will.
	StateRunning State = "running"
	// StateCompleted: done; only its key is kept (a tombstone).
	StateCompleted State = "completed"
	// StateDead: failed for good, kept in dead_tasks until an operator
	// retries or deletes it.
	StateDead State = "dead"
)
