// Package ordering runs the work of one ordering_id one piece at a time
// inside a node, in the order it was submitted, while different ordering_ids
// run in parallel.
//
// The database already allows at most one running task per ordering_id (the
// queue row's running flag, backed by a unique partial index). This package
// is the node's own guard for the cases the database cannot see: a handler
// that ignores its cancelled context after a lease was lost or a graceful stop
// released its task. If the same ordering_id is claimed again by this node,
// its next task waits here until the old handler has really returned.
package ordering

import "sync"

// Serializer runs functions serially per key.
type Serializer struct {
	mu      sync.Mutex
	waiting map[string][]func() // key present = a function of that key runs
	wg      sync.WaitGroup
}

// New returns an empty Serializer.
func New() *Serializer {
	return &Serializer{waiting: make(map[string][]func())}
}

// Submit runs fn on its own goroutine once every function submitted before it
// under the same key has returned.
func (s *Serializer) Submit(key string, fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wg.Add(1)
	if q, busy := s.waiting[key]; busy {
		s.waiting[key] = append(q, fn)
		return
	}
	s.waiting[key] = nil
	go s.run(key, fn)
}

func (s *Serializer) run(key string, fn func()) {
	for {
		fn()
		// Done only after the lane's bookkeeping, so that once Wait returns
		// every lane is idle (Busy reports 0).
		s.mu.Lock()
		q := s.waiting[key]
		if len(q) == 0 {
			delete(s.waiting, key)
			s.mu.Unlock()
			s.wg.Done()
			return
		}
		fn = q[0]
		q[0] = nil
		s.waiting[key] = q[1:]
		s.mu.Unlock()
		s.wg.Done()
	}
}

// Busy reports how many keys have a function running.
func (s *Serializer) Busy() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiting)
}

// Wait blocks until every submitted function has returned.
func (s *Serializer) Wait() { s.wg.Wait() }
