// Package control owns what operators decide at run time and every node
// must honour: the kinds paused cluster-wide and the running tasks an
// operator asked to cancel. Both live in the database as rows
// (pgsched.paused_kinds, pgsched.cancel_requests), so they hold across
// restarts and for nodes that join later; a node reads them when told
// (NOTIFY) and every maintenance round, keeps the last read here, and acts
// on what changed through its dispatcher: claimed tasks of a newly paused
// kind that have not started go back, and the handlers of cancelled tasks
// have their contexts cancelled. The dispatcher asks Paused and Cancelled
// before it starts each task.
//
// Claims and hand-overs skip paused kinds in the database already; this
// covers what the node took before the pause.
package control

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/pgsched/pgsched/internal/store"
)

// Dispatcher is what State acts on when the operators' decisions change.
type Dispatcher interface {
	// GiveBackPaused gives back the claimed tasks of paused kinds that
	// have not started.
	GiveBackPaused()
	// CancelTasks cancels the handlers of the tasks in ids it runs, and
	// records those it holds unstarted as cancelled.
	CancelTasks(ids map[int64]bool)
}

// Events observe State (metrics). Any field may be nil.
type Events struct {
	// Paused is told how many kinds are paused after each read.
	Paused func(n int)
}

// State is a node's copy of the operators' decisions.
type State struct {
	Store  store.Store
	DB     store.DBTX
	Logger *slog.Logger
	Events Events

	// paused holds the kinds paused cluster-wide, as last read; nil before
	// the first read.
	paused atomic.Pointer[map[string]bool]
	// cancels holds the ids of tasks an operator asked to cancel, as last
	// read.
	cancels atomic.Pointer[map[int64]bool]
}

// Paused reports whether kind is paused cluster-wide, as last read.
func (s *State) Paused(kind string) bool {
	m := s.paused.Load()
	return m != nil && (*m)[kind]
}

// Cancelled reports whether an operator asked to cancel the task with this
// id, as last read.
func (s *State) Cancelled(id int64) bool {
	m := s.cancels.Load()
	return m != nil && (*m)[id]
}

// RefreshPaused reads the paused kinds, logs what changed and has d give
// back the claimed tasks of newly paused kinds.
func (s *State) RefreshPaused(ctx context.Context, d Dispatcher) {
	kinds, err := s.Store.PausedKinds(ctx, s.DB)
	if err != nil {
		if ctx.Err() == nil {
			s.Logger.Warn("reading paused kinds failed; will retry", "error", err)
		}
		return
	}
	now := make(map[string]bool, len(kinds))
	for _, k := range kinds {
		now[k.Kind] = true
	}
	before := s.paused.Swap(&now)
	newly := false
	for k := range now {
		if before == nil || !(*before)[k] {
			newly = true
			s.Logger.Info("kind paused: its tasks are not started", "kind", k)
		}
	}
	if before != nil {
		for k := range *before {
			if !now[k] {
				s.Logger.Info("kind resumed", "kind", k)
			}
		}
	}
	if f := s.Events.Paused; f != nil {
		f(len(now))
	}
	if newly {
		d.GiveBackPaused()
	}
}

// RefreshCancels reads the cancel requests and has d cancel the tasks
// among them it holds.
func (s *State) RefreshCancels(ctx context.Context, d Dispatcher) {
	ids, err := s.Store.CancelRequests(ctx, s.DB)
	if err != nil {
		if ctx.Err() == nil {
			s.Logger.Warn("reading cancel requests failed; will retry", "error", err)
		}
		return
	}
	set := make(map[int64]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	s.cancels.Store(&set)
	if len(set) > 0 {
		d.CancelTasks(set)
	}
}
