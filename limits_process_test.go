package pgsched_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/localpg"
)

// receiver is the far end of the "hit" tasks' calls: it serves each in
// hold, and counts how many it serves at once, as a rate-limited API
// would see them.
type receiver struct {
	URL  string
	hold time.Duration

	mu       sync.Mutex
	inflight int
	most     int
	served   map[string]int
	since    time.Time     // when inflight last changed
	atLimit  time.Duration // time spent serving limit calls at once
	limit    int
	first    time.Time
	last     time.Time
}

func newReceiver(t *testing.T, hold time.Duration, limit int) *receiver {
	t.Helper()
	r := &receiver{hold: hold, limit: limit, served: map[string]int{}}
	ln, err := localpg.Listen()
	require.NoError(t, err)
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	r.URL = "http://" + ln.Addr().String() + "/hit"
	return r
}

// change moves inflight by d, keeping the time spent at the limit.
func (r *receiver) change(d int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if r.first.IsZero() {
		r.first = now
	}
	if r.inflight == r.limit {
		r.atLimit += now.Sub(r.since)
	}
	r.inflight += d
	r.most = max(r.most, r.inflight)
	r.since, r.last = now, now
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.change(1)
	time.Sleep(r.hold)
	r.mu.Lock()
	r.served[req.URL.Query().Get("id")]++
	r.mu.Unlock()
	r.change(-1)
	w.WriteHeader(http.StatusOK)
}

// report returns the most calls served at once, how many distinct ids were
// served, and the share of the time from the first call to the last spent
// serving limit calls at once.
func (r *receiver) report() (most, ids int, atLimit float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	span := r.last.Sub(r.first)
	if span > 0 {
		atLimit = float64(r.atLimit) / float64(span)
	}
	return r.most, len(r.served), atLimit
}

func scheduleHits(t *testing.T, b clientBundle, n int) {
	t.Helper()
	tasks := make([]pgsched.Task, n)
	for i := range tasks {
		tasks[i] = pgsched.Task{OrderingID: fmt.Sprint("hit-", i), ScheduledAt: time.Now(), Kind: "hit"}
	}
	_, err := b.client.ScheduleMany(context.Background(), tasks)
	require.NoError(t, err)
}

// TestLimitMaxRunningAcrossProcesses: a kind limited to 3 running, three
// worker processes with 20 handlers each, handlers that call a receiver
// taking 100 ms: the receiver never serves more than 3 at once, and every
// task runs.
func TestLimitMaxRunningAcrossProcesses(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	rcv := newReceiver(t, 100*time.Millisecond, 3)
	_, err := b.client.SetLimit(context.Background(), "hit", pgsched.Limit{MaxRunning: 3})
	require.NoError(t, err)
	for i := range 3 {
		startChild(t, b.db, fmt.Sprint("limit-node-", i), 0, 20, 5*time.Second, "CHILD_HIT_URL="+rcv.URL)
	}
	scheduleHits(t, b, 60)
	waitDrained(t, b, time.Minute)
	most, ids, atLimit := rcv.report()
	require.Equal(t, 60, ids, "every task ran")
	require.LessOrEqual(t, most, 3, "never more than the limit at once")
	require.Equal(t, 3, most, "the limit is used")
	t.Logf("3 calls at once %.0f%% of the time", 100*atLimit)
	ls, err := b.client.Limits(context.Background())
	require.NoError(t, err)
	require.Len(t, ls, 1)
	require.Zero(t, ls[0].Running, "every place given back")
	require.Zero(t, ls[0].Waiting)
}

// TestLimitHoldsWhileNodesDieAndFreeze: the same limit while one worker is
// frozen (SIGSTOP) and another killed (SIGKILL), each holding tasks: the
// tasks they held count until their leases run out and are rescued, so
// the receiver still never serves more than 3 at once, and nothing is lost.
// A finish hands the room it frees to the next task at once, so the kind
// stays with the nodes that run it: the test freezes whichever runs it,
// then kills whichever takes it over.
func TestLimitHoldsWhileNodesDieAndFreeze(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	rcv := newReceiver(t, 100*time.Millisecond, 3)
	_, err := b.client.SetLimit(context.Background(), "hit", pgsched.Limit{MaxRunning: 3})
	require.NoError(t, err)
	var kids []*child
	for i := range 3 {
		kids = append(kids, startChild(t, b.db, fmt.Sprint("limit-chaos-", i), 0, 20, 5*time.Second, "CHILD_HIT_URL="+rcv.URL))
	}
	scheduleHits(t, b, 90)
	// holder finds a node other than skip that runs a task of the kind.
	holder := func(found *int, skip int) func() bool {
		return func() bool {
			for i := range kids {
				if i != skip && len(runningOn(t, b.db, fmt.Sprint("limit-chaos-", i))) > 0 {
					*found = i
					return true
				}
			}
			return false
		}
	}
	var frozen, killed int
	eventually(t, 30*time.Second, holder(&frozen, -1), "a node runs a task")
	require.NoError(t, kids[frozen].cmd.Process.Signal(syscall.SIGSTOP))
	// Frozen until the test ends (then killed): a thawed node's late
	// outcomes are fenced, which other tests show.
	eventually(t, 30*time.Second, holder(&killed, frozen), "another node runs a task")
	require.NoError(t, kids[killed].cmd.Process.Signal(syscall.SIGKILL))
	_ = kids[killed].cmd.Wait()
	waitDrained(t, b, 2*time.Minute)
	most, ids, _ := rcv.report()
	require.Equal(t, 90, ids, "every task ran, the dead and frozen nodes' ones rescued")
	require.LessOrEqual(t, most, 3, "never more than the limit at once")
	ls, err := b.client.Limits(context.Background())
	require.NoError(t, err)
	require.Zero(t, ls[0].Running, "the rescued tasks' places were given back")
}
