package observe

import (
	"log/slog"
	"sync"
	"time"

	"github.com/pgsched/pgsched/internal/dispatch"
)

// retryLogEvery is how often at most a retry of one kind is logged.
const retryLogEvery = 10 * time.Second

// retryLog logs retries so that a broken endpoint shows in the log without
// flooding it: the first retry of a kind is logged, and then at most one
// every retryLogEvery, saying how many were left out since. Kinds are
// keyed by their bounded metric label, so the map stays small.
type retryLog struct {
	mu    sync.Mutex
	kinds map[string]*retrySpell
}

type retrySpell struct {
	logged  time.Time
	skipped int
}

func (r *retryLog) log(logger *slog.Logger, label string, job *dispatch.Job, res dispatch.Result) {
	now := time.Now()
	r.mu.Lock()
	if r.kinds == nil {
		r.kinds = map[string]*retrySpell{}
	}
	s := r.kinds[label]
	if s == nil {
		s = &retrySpell{}
		r.kinds[label] = s
	}
	if !s.logged.IsZero() && now.Sub(s.logged) < retryLogEvery {
		s.skipped++
		r.mu.Unlock()
		return
	}
	skipped := s.skipped
	s.logged, s.skipped = now, 0
	r.mu.Unlock()
	logger.Warn("task will retry", "kind", job.Kind, "ordering_id", job.OrderingID, "task_id", job.ID,
		"attempt", job.Attempt, "retry_in", res.RetryIn.Round(time.Millisecond), "error", res.Error,
		"retries_not_logged", skipped)
}
