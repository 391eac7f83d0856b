package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/pgsched/pgsched/internal/lease"
)

// Service is one periodic duty run in rounds.
type Service interface {
	// Name says what it does, for logs.
	Name() string
	// Round does the duty once, under the leadership l (zero for a duty
	// every node runs).
	Round(ctx context.Context, l lease.Leadership) error
}

// Looper is a duty that runs on its own schedule beside the rounds, for
// work that may outlast a round.
type Looper interface {
	Name() string
	// Loop runs the duty until ctx ends.
	Loop(ctx context.Context)
}

// Runner runs services in rounds, in the order they were added, each when
// its interval has passed since it last succeeded, and loopers beside.
type Runner struct {
	Logger   *slog.Logger
	services []*entry
	loopers  []Looper
}

type entry struct {
	svc   Service
	every time.Duration
	last  time.Time
}

// Add adds a service run every round (every 0) or at most once per every.
func (r *Runner) Add(s Service, every time.Duration) *Runner {
	r.services = append(r.services, &entry{svc: s, every: every})
	return r
}

// AddLooper adds a duty that Run starts.
func (r *Runner) AddLooper(l Looper) *Runner {
	r.loopers = append(r.loopers, l)
	return r
}

// Round runs the services that are due, in order. A failure is logged
// and the service is tried again next round; the others go on.
func (r *Runner) Round(ctx context.Context, l lease.Leadership) {
	for _, e := range r.services {
		if ctx.Err() != nil {
			return
		}
		if e.every > 0 && time.Since(e.last) < e.every {
			continue
		}
		if err := e.svc.Round(ctx, l); err != nil {
			if ctx.Err() == nil {
				r.Logger.Warn("maintenance failed; the next round tries again", "duty", e.svc.Name(), "term", l.Term, "error", err)
			}
			continue
		}
		e.last = time.Now()
	}
}

// Run runs the loopers until ctx ends.
func (r *Runner) Run(ctx context.Context) {
	done := make(chan struct{}, len(r.loopers))
	for _, l := range r.loopers {
		go func() { defer func() { done <- struct{}{} }(); l.Loop(ctx) }()
	}
	for range r.loopers {
		<-done
	}
}
