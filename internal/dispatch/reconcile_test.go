package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/dispatch"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedtype"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var errLost = errors.New("test: response lost after the statement committed")

// lossy passes statements to the database, except that it can make the
// next call of a named query lose its response: the statement runs and
// commits, then the caller gets an error, as when a connection drops
// between the server's commit and the client reading the result. A
// response without rows is lost too and the next call lost as well, so a
// loss always carries rows.
type lossy struct {
	store.DBTX
	mu   sync.Mutex
	lose map[string]int // sqlc query name -> calls left to lose
	lost atomic.Int64   // rows the lost responses carried
}

func (l *lossy) loseNext(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lose[name]++
}

// take reports whether to lose this call's response. A name matches its
// Citus form too (TaskFinish: TaskFinishOn, see store/citus.go).
func (l *lossy) take(sql string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, n := range l.lose {
		if n > 0 && (strings.Contains(sql, "-- name: "+name+" ") || strings.Contains(sql, "-- name: "+name+"On ")) {
			l.lose[name] = n - 1
			return true
		}
	}
	return false
}

// nameOf returns the sqlc query name a statement carries, in its
// single-server form.
func nameOf(sql string) string {
	_, rest, _ := strings.Cut(sql, "-- name: ")
	name, _, _ := strings.Cut(rest, " ")
	return strings.TrimSuffix(name, "On")
}

func (l *lossy) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if !l.take(sql) {
		return l.DBTX.Query(ctx, sql, args...)
	}
	rows, err := l.DBTX.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	n := int64(0)
	for rows.Next() {
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if n == 0 {
		// An empty response lost costs nothing to find: lose the next one.
		l.loseNext(nameOf(sql))
	}
	l.lost.Add(n)
	return nil, errLost
}

type fixture struct {
	db     *pgtest.DB
	client *pgsched.Client
	db2    *lossy
	ran    sync.Map // task id -> *atomic.Int32 (runs)
	order  chan string
	block  chan struct{} // tasks of kind "slow" wait for it to close
	given  atomic.Int64  // tasks reconcile gave back
	// Hooks' counts: every job reported claimed is reported finished once.
	claimed, settled, fenced atomic.Int64
	cancel                   context.CancelFunc
	finished                 chan struct{}
}

// start runs a node and a dispatcher whose statements go through a lossy
// connection, with short intervals so the test takes a fraction of a second.
func start(t *testing.T) *fixture {
	t.Helper()
	db, st, c, node := newNode(t, pgtest.SchemaOptions{}, 5*time.Second)
	f := &fixture{db: db, client: c, db2: &lossy{DBTX: db.Pool, lose: map[string]int{}},
		order: make(chan string, 100), block: make(chan struct{}), finished: make(chan struct{})}

	all := make([]int32, 8)
	for i := range all {
		all[i] = int32(i)
	}
	d, err := dispatch.New(dispatch.Config{
		Store: st, DB: f.db2, Node: node, Partitions: func() []int32 { return all },
		Concurrency: 10, Prefetch: 10, PollInterval: 20 * time.Millisecond, ReconcileDelay: 100 * time.Millisecond,
		FinishBatch: 1000, FinishDelay: time.Millisecond, DrainTimeout: 10 * time.Second,
		Exec: func(ctx context.Context, job *dispatch.Job) dispatch.Result {
			v, _ := f.ran.LoadOrStore(job.ID, new(atomic.Int32))
			v.(*atomic.Int32).Add(1)
			if job.Kind == "slow" {
				<-f.block
			}
			f.order <- job.UniquenessKey
			return dispatch.Result{Outcome: pgschedtype.OutcomeCompleted}
		},
		Hooks: dispatch.Hooks{
			Reconciled: func(n int) { f.given.Add(int64(n)) },
			Claimed:    func(*dispatch.Job) { f.claimed.Add(1) },
			Finished: func(_ *dispatch.Job, res dispatch.Result, _ time.Duration) {
				f.settled.Add(1)
				if res.Outcome == pgschedtype.OutcomeFenced {
					f.fenced.Add(1)
				}
			},
		},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	nodeCtx, nodeStop := context.WithCancel(context.Background())
	nodeDone := make(chan struct{})
	go func() { defer close(nodeDone); _ = node.Run(nodeCtx) }()
	require.Eventually(t, func() bool { return node.Current() != nil }, pgtest.Patience(10*time.Second), 5*time.Millisecond)
	go func() { defer close(f.finished); _ = d.Run(ctx) }()
	f.cancel = cancel
	t.Cleanup(func() {
		select {
		case <-f.block:
		default:
			close(f.block)
		}
		cancel()
		<-f.finished
		nodeStop()
		<-nodeDone
	})
	return f
}

func (f *fixture) schedule(t *testing.T, tasks ...pgsched.Task) {
	t.Helper()
	_, err := f.client.ScheduleMany(context.Background(), tasks)
	require.NoError(t, err)
}

// runs returns how often each task ran, by id.
func (f *fixture) runs() map[int64]int32 {
	out := map[int64]int32{}
	f.ran.Range(func(k, v any) bool { out[k.(int64)] = v.(*atomic.Int32).Load(); return true })
	return out
}

func (f *fixture) empty(t *testing.T) bool {
	t.Helper()
	var n int
	require.NoError(t, f.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM "+f.db.Schema+".tasks").Scan(&n))
	return n == 0
}

// TestLostClaimResponse: a claim commits but its response is lost, so the
// tasks it took are running under the node's live term and nobody would
// ever run them. The node finds them by comparing the database with what it
// knows, gives them back and runs them, once each; a task it knows of and
// is running meanwhile is left alone.
func TestLostClaimResponse(t *testing.T) {
	t.Parallel()
	f := start(t)
	now := time.Now()
	f.schedule(t, pgsched.Task{OrderingID: "slow", ScheduledAt: now, UniquenessKey: "slow", Kind: "slow"})
	require.Eventually(t, func() bool { return len(f.runs()) == 1 }, pgtest.Patience(10*time.Second), 5*time.Millisecond, "the slow task runs")

	f.db2.loseNext("TaskClaimDue")
	var tasks []pgsched.Task
	for i := range 5 {
		tasks = append(tasks, pgsched.Task{OrderingID: fmt.Sprint("o", i), ScheduledAt: now, UniquenessKey: fmt.Sprint(i)})
	}
	f.schedule(t, tasks...)
	require.Eventually(t, func() bool { return len(f.runs()) == 6 }, pgtest.Patience(10*time.Second), 5*time.Millisecond,
		"the tasks of the lost claim run after all")
	// On one server the claim takes all five. Citus has no distributed
	// snapshot: a claim may see a multi-worker enqueue half committed and
	// take only some; the rest are claimed normally.
	lost := f.db2.lost.Load()
	if !pgtest.Citus() {
		require.EqualValues(t, 5, lost, "the lost claim took all five")
	}
	require.Positive(t, lost, "a claim's response was lost")
	require.EqualValues(t, lost, f.given.Load(), "exactly the lost claim's tasks were given back")
	close(f.block)
	require.Eventually(t, func() bool { return f.empty(t) }, pgtest.Patience(10*time.Second), 5*time.Millisecond, "every outcome recorded")
	for id, n := range f.runs() {
		require.EqualValues(t, 1, n, "task %d ran once", id)
	}
}

// TestLostFinishResponse: a finish commits (the task completed, its
// successor handed over to this node) but its response is lost. The retry
// is fenced (the task is gone) and the successor runs under the node's term
// unknown to it, until reconcile gives it back; the ordering_id's tasks
// still run in order, once each.
func TestLostFinishResponse(t *testing.T) {
	t.Parallel()
	f := start(t)
	f.db2.loseNext("TaskFinish")
	now := time.Now()
	var tasks []pgsched.Task
	for i := range 3 {
		tasks = append(tasks, pgsched.Task{OrderingID: "chain", ScheduledAt: now.Add(time.Duration(i) * time.Millisecond), UniquenessKey: fmt.Sprint(i)})
	}
	f.schedule(t, tasks...)
	var order []string
	for len(order) < 3 {
		select {
		case k := <-f.order:
			order = append(order, k)
		case <-time.After(10 * time.Second):
			t.Fatalf("ran %v of 3 tasks", order)
		}
	}
	require.Equal(t, []string{"0", "1", "2"}, order)
	require.EqualValues(t, 1, f.given.Load(), "the successor handed over in the lost response was given back")
	require.Eventually(t, func() bool { return f.empty(t) }, pgtest.Patience(10*time.Second), 5*time.Millisecond, "every outcome recorded")
	for id, n := range f.runs() {
		require.EqualValues(t, 1, n, "task %d ran once", id)
	}
	// The lost finish's retry was fenced, and the hooks still balance: the
	// running-tasks gauge they feed ends at zero.
	require.Eventually(t, func() bool { return f.claimed.Load() == f.settled.Load() }, pgtest.Patience(10*time.Second), 5*time.Millisecond,
		"claimed %d, settled %d", f.claimed.Load(), f.settled.Load())
	require.EqualValues(t, 1, f.fenced.Load())
}
