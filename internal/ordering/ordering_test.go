package ordering

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSerialPerKeyParallelAcross(t *testing.T) {
	t.Parallel()
	const n = 8
	s := New(n)
	defer s.Close()
	const keys, perKey = 50, 40
	var mu sync.Mutex
	got := map[string][]int{}
	running := map[string]*atomic.Int32{}
	for k := range keys {
		running[fmt.Sprint(k)] = &atomic.Int32{}
	}
	var maxParallel, cur atomic.Int32
	for i := range perKey {
		for k := range keys {
			key := fmt.Sprint(k)
			s.Submit(key, func() {
				require.Equal(t, int32(1), running[key].Add(1), "two functions of one key at once")
				n := cur.Add(1)
				for {
					m := maxParallel.Load()
					if n <= m || maxParallel.CompareAndSwap(m, n) {
						break
					}
				}
				time.Sleep(50 * time.Microsecond)
				mu.Lock()
				got[key] = append(got[key], i)
				mu.Unlock()
				cur.Add(-1)
				running[key].Add(-1)
			})
		}
	}
	s.Wait()
	require.Zero(t, s.Busy())
	for k := range keys {
		seq := got[fmt.Sprint(k)]
		require.Len(t, seq, perKey)
		for i, v := range seq {
			require.Equal(t, i, v, "key %d ran out of order", k)
		}
	}
	require.Greater(t, maxParallel.Load(), int32(1), "different keys ran in parallel")
	require.LessOrEqual(t, maxParallel.Load(), int32(n), "more than n at once")
}

// TestBounded: with more ready work than goroutines, exactly n functions
// run; the rest start, in the order submitted, as those return.
func TestBounded(t *testing.T) {
	t.Parallel()
	const n = 3
	s := New(n)
	defer s.Close()
	gate := make(chan struct{})
	started := make(chan int, 3*n)
	for i := range 3 * n {
		s.Submit(fmt.Sprint("k", i), func() {
			started <- i
			<-gate
		})
	}
	for i := range n {
		require.Equal(t, i, <-started)
	}
	select {
	case i := <-started:
		t.Fatalf("function %d started while %d were running", i, n)
	case <-time.After(50 * time.Millisecond):
	}
	close(gate)
	for i := n; i < 3*n; i++ {
		require.Equal(t, i, <-started, "started in the order submitted")
	}
	s.Wait()
}

// TestBurstAfterIdle: a burst of work arriving while a goroutine sits idle
// gets every goroutine up to n, not only the idle one. A woken goroutine
// still counts as idle until it runs, and the pool used to take that for
// free capacity: the burst then ran one at a time while the node believed
// its handlers busy.
func TestBurstAfterIdle(t *testing.T) {
	t.Parallel()
	const n = 8
	s := New(n)
	defer s.Close()
	s.Submit("warm", func() {})
	s.Wait()
	require.Eventually(t, func() bool { // the warm goroutine waits for work
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.idle == 1
	}, 10*time.Second, time.Millisecond)
	gate := make(chan struct{})
	var running atomic.Int32
	for i := range n {
		s.Submit(fmt.Sprint("k", i), func() {
			running.Add(1)
			<-gate
		})
	}
	ok := assert.Eventually(t, func() bool { return running.Load() == n }, 10*time.Second, time.Millisecond,
		"only some of the burst runs at once")
	t.Logf("running at once: %d of %d", running.Load(), n)
	close(gate)
	s.Wait()
	require.True(t, ok)
}

func TestWaitWithNothingSubmitted(t *testing.T) {
	t.Parallel()
	s := New(4)
	s.Wait()
	s.Close()
}

// TestSubmitAfterClose: work submitted after Close still runs, and every
// goroutine exits (goleak checks at the end).
func TestSubmitAfterClose(t *testing.T) {
	t.Parallel()
	s := New(4)
	var ran atomic.Int32
	for i := range 10 {
		s.Submit(fmt.Sprint(i%3), func() { ran.Add(1) })
	}
	s.Wait()
	s.Close()
	done := make(chan struct{})
	s.Submit("late", func() { ran.Add(1); close(done) })
	<-done
	s.Wait()
	require.Equal(t, int32(11), ran.Load())
}

// TestUrgentGoesFirst: with the one goroutine busy, work submitted urgent
// runs before work submitted before it, but never before what its own key
// has ahead of it.
func TestUrgentGoesFirst(t *testing.T) {
	p := New(1)
	defer p.Close()
	release := make(chan struct{})
	var mu sync.Mutex
	var order []string
	rec := func(s string) func() {
		return func() {
			mu.Lock()
			order = append(order, s)
			mu.Unlock()
		}
	}
	p.Submit("x", func() { <-release })
	p.Submit("a", rec("a"))
	p.Submit("b", rec("b"))
	p.SubmitUrgent("c", rec("c"))
	p.SubmitUrgent("a", rec("a2")) // behind a, which is ready and not urgent
	close(release)
	p.Wait()
	require.Equal(t, []string{"c", "a", "b", "a2"}, order)
}
