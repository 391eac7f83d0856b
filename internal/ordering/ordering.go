// Package ordering runs the work of one ordering_id one piece at a time
// inside a node, in the order it was submitted, while different ordering_ids
// run in parallel.
//
// The database already allows at most one running task per ordering_id (only
// an ordering_id's head runs, and heads are unique per ordering_id). This
// package is the node's own guard for the cases the database cannot see: a
// handler that ignores its cancelled context after a lease was lost or a
// graceful stop released its task. If the same ordering_id is claimed again
// by this node, its next task waits here until the old handler has really
// returned.
//
// Lanes run on goroutines that are kept for a while once idle: starting a
// goroutine per task, whose stack then grew to a handler's depth, cost a
// sixth of a busy worker's CPU.
package ordering

import (
	"sync"
	"sync/atomic"
	"time"
)

// idleFor is how long a goroutine without work waits for more before it
// exits.
const idleFor = 2 * time.Second

// Serializer runs functions serially per key.
type Serializer struct {
	mu      sync.Mutex
	waiting map[string][]func() // key present = a function of that key runs
	wg      sync.WaitGroup
	idle    chan lane     // idle goroutines take new lanes here
	quit    chan struct{} // closed by Close
	once    sync.Once
	parked  atomic.Int32 // goroutines waiting for a lane
	started atomic.Int32 // goroutines started
}

// lane is the first function of a key that was idle.
type lane struct {
	key string
	fn  func()
}

// New returns an empty Serializer.
func New() *Serializer {
	return &Serializer{waiting: make(map[string][]func()), idle: make(chan lane), quit: make(chan struct{})}
}

// Submit runs fn once every function submitted before it under the same key
// has returned; functions of different keys run in parallel.
func (s *Serializer) Submit(key string, fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wg.Add(1)
	if q, busy := s.waiting[key]; busy {
		s.waiting[key] = append(q, fn)
		return
	}
	s.waiting[key] = nil
	select {
	case s.idle <- lane{key, fn}:
	default:
		s.started.Add(1)
		go s.work(lane{key, fn})
	}
}

// work runs lanes until it has been idle for idleFor or Close is called.
func (s *Serializer) work(l lane) {
	t := time.NewTimer(idleFor)
	defer t.Stop()
	for {
		s.run(l.key, l.fn)
		t.Reset(idleFor)
		s.parked.Add(1)
		select {
		case l = <-s.idle:
			s.parked.Add(-1)
		case <-t.C:
			s.parked.Add(-1)
			return
		case <-s.quit:
			s.parked.Add(-1)
			return
		}
	}
}

// run runs fn and then every function queued behind it under key.
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

// Close lets the idle goroutines exit; lanes still running finish first,
// and a lane submitted later runs on a goroutine that exits after it.
func (s *Serializer) Close() { s.once.Do(func() { close(s.quit) }) }
