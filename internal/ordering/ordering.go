// Package ordering runs the work of one ordering_id one piece at a time
// inside a node, in the order it was submitted, while different ordering_ids
// run in parallel on a bounded number of goroutines.
//
// The database already allows at most one running task per ordering_id (only
// an ordering_id's head runs, and heads are unique per ordering_id). This
// package is the node's own guard for the cases the database cannot see: a
// handler that ignores its cancelled context after a lease was lost or a
// graceful stop released its task. If the same ordering_id is claimed again
// by this node, its next task waits here until the old handler has really
// returned.
//
// A Pool is also the node's handler pool: at most n functions run at once,
// on n long-lived goroutines that take the next ready function as soon as
// they finish one. Work waiting for a free goroutine is a queue entry, not
// a parked goroutine: with a goroutine per ordering_id (and a semaphore for
// the concurrency limit) every task cost two goroutine hand-offs, a
// wake-up of its own goroutine and a wait for a slot: the pool spends a
// fifth to a third less of the worker's CPU per task in the burn-downs. A
// goroutine that finds more ready work keeps running instead.
package ordering

import (
	"sync"
)

// Pool runs functions serially per key and at most n at once.
type Pool struct {
	mu   sync.Mutex
	wake *sync.Cond // signalled when ready gains work or the pool closes
	max  int
	// ready holds functions whose key has nothing running or ahead of
	// them, in submission order: ready[head:] is the queue. urgent is
	// another such queue, taken from first (SubmitUrgent).
	ready  []lane
	head   int
	urgent []lane
	uhead  int
	// waiting has an entry for every key with a function ready or
	// running; its value are the functions submitted after it.
	waiting map[string][]func()
	workers int // goroutines started and not exited
	idle    int // goroutines waiting for ready work
	closed  bool
	wg      sync.WaitGroup // functions submitted and not returned
}

type lane struct {
	key string
	fn  func()
}

// New returns a Pool that runs at most n functions at once.
func New(n int) *Pool {
	p := &Pool{max: max(n, 1), waiting: map[string][]func(){}}
	p.wake = sync.NewCond(&p.mu)
	return p
}

// Submit runs fn once every function submitted before it under the same key
// has returned and a goroutine is free; functions of different keys start
// in the order submitted. After Close, fn still runs.
func (p *Pool) Submit(key string, fn func()) { p.submit(key, fn, false) }

// SubmitUrgent is Submit for work that goes before all the ready work
// submitted without it (a task of a higher priority), still after what
// its key has running or ahead of it.
func (p *Pool) SubmitUrgent(key string, fn func()) { p.submit(key, fn, true) }

func (p *Pool) submit(key string, fn func(), urgent bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wg.Add(1)
	if q, busy := p.waiting[key]; busy {
		p.waiting[key] = append(q, fn)
		return
	}
	p.waiting[key] = nil
	p.push(lane{key, fn}, urgent)
}

// queued is how many lanes are ready. Called with mu held.
func (p *Pool) queued() int { return len(p.ready) - p.head + len(p.urgent) - p.uhead }

// push queues a ready lane and finds it a goroutine. Called with mu held.
func (p *Pool) push(l lane, urgent bool) {
	if urgent {
		if p.uhead > 0 && p.uhead == len(p.urgent) {
			p.urgent, p.uhead = p.urgent[:0], 0
		}
		p.urgent = append(p.urgent, l)
	} else {
		if p.head > 0 && p.head == len(p.ready) {
			p.ready, p.head = p.ready[:0], 0
		}
		p.ready = append(p.ready, l)
	}
	if p.idle > 0 {
		p.wake.Signal()
	}
	// A woken goroutine counts as idle until it has the lock again, so a
	// burst of pushes cannot rely on the idle ones alone: every ready lane
	// beyond them gets a goroutine of its own, up to max.
	if p.queued() > p.idle && p.workers < p.max {
		p.workers++
		go p.work()
	}
}

// work runs ready lanes until the pool is closed and nothing is ready.
func (p *Pool) work() {
	p.mu.Lock()
	for {
		for p.queued() == 0 && !p.closed {
			p.idle++
			p.wake.Wait()
			p.idle--
		}
		if p.queued() == 0 {
			p.workers--
			p.mu.Unlock()
			return
		}
		p.run(p.take())
	}
}

// take removes the next ready lane, urgent ones first. Called with mu
// held, a lane ready.
func (p *Pool) take() lane {
	if p.uhead < len(p.urgent) {
		l := p.urgent[p.uhead]
		p.urgent[p.uhead] = lane{}
		p.uhead++
		return l
	}
	l := p.ready[p.head]
	p.ready[p.head] = lane{}
	p.head++
	return l
}

// run runs l without mu held, then queues its key's next function, if
// any, behind the work of other keys that waited meanwhile. Called and
// returns with mu held.
func (p *Pool) run(l lane) {
	p.mu.Unlock()
	l.fn()
	p.mu.Lock()
	if q := p.waiting[l.key]; len(q) > 0 {
		next := q[0]
		q[0] = nil
		p.waiting[l.key] = q[1:]
		p.push(lane{l.key, next}, false)
	} else {
		delete(p.waiting, l.key)
	}
	// Done only after the key's bookkeeping, so that once Wait returns
	// every key is idle (Busy reports 0).
	p.wg.Done()
}

// Busy reports how many keys have a function ready or running.
func (p *Pool) Busy() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.waiting)
}

// Wait blocks until every submitted function has returned.
func (p *Pool) Wait() { p.wg.Wait() }

// Close lets the goroutines exit once nothing is ready; functions submitted
// later still run, on a goroutine started for them.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	p.wake.Broadcast()
}
