package dispatch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedtype"
)

// Job is a claimed task on its way to a handler.
type Job struct {
	// *store.Claimed: the claim's or finish's row itself, not a copy (a
	// batch's rows stay in one slice).
	*store.Claimed
	// Epoch is the node term the task was claimed under.
	Epoch int64
	// Received is when the claim reached this process (local clock).
	Received time.Time
	// HandedOver means its predecessor's finish started it on this node
	// instead of a claim (see store.Handover).
	HandedOver bool

	// state is jobQueued until a handler takes the job (jobStarted) or
	// the node gives it back unstarted (jobGivenBack); whichever comes
	// first wins.
	state atomic.Int32

	// cancelMu guards cancel, the running handler's context's cancel, and
	// cancelled, set once an operator asked to cancel the task.
	cancelMu  sync.Mutex
	cancel    context.CancelCauseFunc
	cancelled bool
}

// ErrCancelled is the cause of a handler's context when an operator
// cancelled its task (pgsched.cancel_running).
var ErrCancelled = errors.New("pgsched: task cancelled by an operator (pgsched.cancel_running)")

// Job states.
const (
	jobQueued int32 = iota
	jobStarted
	jobGivenBack
)

// StartLateness is how late the job starts if it starts now, on the
// database's clock: its claim time plus the time since the claim arrived,
// minus its scheduled time.
func (j *Job) StartLateness() time.Duration {
	return j.ClaimedAt.Add(time.Since(j.Received)).Sub(j.ScheduledAt)
}

// Result is what a handler's run came to.
type Result struct {
	// Outcome is completed, retry, dead, release or snooze.
	Outcome pgschedtype.Outcome
	// RetryIn is the delay before the retry or the snooze's end.
	RetryIn time.Duration
	// Output is the handler's result (JSON) to keep with the completion;
	// nil for none.
	Output []byte
	// Error explains a retry or death.
	Error string
	// Recorded means the outcome is already written (a transactional handler
	// committed it together with its own writes).
	Recorded bool
}

// ExecFunc runs one job. ctx ends when the node loses its lease or the
// drain timeout passes during a stop.
type ExecFunc func(ctx context.Context, job *Job) Result
