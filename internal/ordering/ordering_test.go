package ordering

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSerialPerKeyParallelAcross(t *testing.T) {
	t.Parallel()
	s := New()
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
}

func TestWaitWithNothingSubmitted(t *testing.T) {
	t.Parallel()
	s := New()
	s.Wait()
	s.Close()
}

// TestGoroutinesReused: lanes submitted after others finished run on the
// goroutines those left parked, and Close lets them go (goleak checks that
// at the end).
func TestGoroutinesReused(t *testing.T) {
	t.Parallel()
	s := New()
	defer s.Close()
	const wave = 8
	for w := range 5 {
		gate := make(chan struct{})
		for i := range wave {
			s.Submit(fmt.Sprint("k", w, i), func() { <-gate })
		}
		close(gate)
		s.Wait()
		for s.parked.Load() < wave {
			runtime.Gosched()
		}
	}
	// Without reuse every lane starts a goroutine (40). A goroutine counted
	// as parked an instant before it waits can still miss a Submit, so
	// allow a few.
	require.Less(t, s.started.Load(), int32(2*wave), "later waves ran on the first wave's goroutines")
}
