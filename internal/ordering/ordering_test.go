package ordering

import (
	"fmt"
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
	New().Wait()
}
