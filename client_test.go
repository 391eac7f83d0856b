package pgsched_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedtype"
)

type clientBundle struct {
	db     *pgtest.DB
	client *pgsched.Client
	store  store.Store
}

func setupClient(t *testing.T) clientBundle {
	t.Helper()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	c, err := pgsched.NewClient(db.Pool, pgsched.ClientConfig{Schema: db.Schema})
	require.NoError(t, err)
	st, err := store.Open(context.Background(), db.Pool, db.Schema)
	require.NoError(t, err)
	return clientBundle{db: db, client: c, store: st}
}

// scheduler is one way to enqueue: the Go client or psql calling the SQL API.
type scheduler func(t *testing.T, b clientBundle, task pgsched.Task) (pgsched.Result, error)

func viaGo(t *testing.T, b clientBundle, task pgsched.Task) (pgsched.Result, error) {
	return b.client.Schedule(context.Background(), task)
}

// viaPsql runs the psql binary, exactly as a SQL user would.
func viaPsql(t *testing.T, b clientBundle, task pgsched.Task) (pgsched.Result, error) {
	t.Helper()
	psql, err := exec.LookPath("psql")
	require.NoError(t, err, "psql is needed for SQL parity tests: apt-get install postgresql-client")
	payload := "'{}'"
	if task.Payload != nil {
		payload = sqlQuote(string(task.Payload))
	}
	kind := "'default'"
	if task.Kind != "" {
		kind = sqlQuote(task.Kind)
	}
	sched := "NULL"
	if !task.ScheduledAt.IsZero() {
		sched = sqlQuote(task.ScheduledAt.Format(time.RFC3339Nano))
	}
	q := fmt.Sprintf("SELECT %s.schedule(%s, %s, %s, %s, %s)", b.db.Schema,
		sqlQuote(task.OrderingID), sched, sqlQuote(task.UniquenessKey), payload, kind)
	cmd := exec.Command(psql, "-X", "-At", "-v", "ON_ERROR_STOP=1", "-d", b.db.URL)
	cmd.Stdin = strings.NewReader(q + ";\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		switch {
		case strings.Contains(msg, "grace window"):
			return "", fmt.Errorf("%w: %s", pgsched.ErrInPast, msg)
		case strings.Contains(msg, "is running"):
			return "", fmt.Errorf("%w: %s", pgsched.ErrTaskRunning, msg)
		}
		return "", fmt.Errorf("%w: %s", pgsched.ErrInvalidTask, msg)
	}
	return pgsched.Result(strings.TrimSpace(string(out))), nil
}

func sqlQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// claimTask claims the head task of orderingID as a worker would.
func claimTask(t *testing.T, b clientBundle, orderingID string) (store.Claimed, int64) {
	t.Helper()
	return claimTaskMax(t, b, orderingID, 100)
}

// claimTaskMax is claimTask with a claim of up to max tasks.
func claimTaskMax(t *testing.T, b clientBundle, orderingID string, max int) (store.Claimed, int64) {
	t.Helper()
	ctx := context.Background()
	node := "test-" + orderingID
	lease, err := b.store.NodeRegister(ctx, b.db.Pool, node, "test", time.Minute, "host", 1, false, 0)
	require.NoError(t, err)
	set, err := b.store.Settings(ctx, b.db.Pool)
	require.NoError(t, err)
	got, err := b.store.Claim(ctx, b.db.Pool, node, lease.Epoch, []int32{int32(pgsched.Partition(orderingID, set.PartitionCount))}, max, 0)
	require.NoError(t, err)
	for _, c := range got {
		if c.OrderingID == orderingID {
			return c, lease.Epoch
		}
	}
	t.Fatalf("no due task for %q could be claimed", orderingID)
	return store.Claimed{}, 0
}

func countRows(t *testing.T, b clientBundle, table string) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM "+b.db.Schema+"."+table).Scan(&n))
	return n
}

func TestScheduleSemantics(t *testing.T) {
	t.Parallel()
	for name, sched := range map[string]scheduler{"go": viaGo, "psql": viaPsql} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupClient(t)
			at := time.Now().Add(-time.Second).Truncate(time.Microsecond)
			task := pgsched.Task{OrderingID: "order-1", ScheduledAt: at, UniquenessKey: "u", Kind: "email", Payload: json.RawMessage(`{"n":1}`)}

			res, err := sched(t, b, task)
			require.NoError(t, err)
			require.Equal(t, pgsched.Inserted, res, "new key")

			task.Payload = json.RawMessage(`{"n":2}`)
			task.Kind = "sms"
			res, err = sched(t, b, task)
			require.NoError(t, err)
			require.Equal(t, pgsched.Updated, res, "same key pending")

			var kind string
			var payload map[string]int
			var stored time.Time
			require.NoError(t, b.db.Pool.QueryRow(context.Background(),
				"SELECT kind, payload, scheduled_at FROM "+b.db.Schema+".tasks").Scan(&kind, &payload, &stored))
			require.Equal(t, "sms", kind)
			require.Equal(t, map[string]int{"n": 2}, payload)
			require.True(t, stored.Equal(at), "scheduled_at kept to the microsecond: %v vs %v", stored, at)

			// While running: rejected with a distinct error, nothing changes.
			c, _ := claimTask(t, b, "order-1")
			task.Payload = json.RawMessage(`{"n":3}`)
			_, err = sched(t, b, task)
			require.ErrorIs(t, err, pgsched.ErrTaskRunning)
			require.NoError(t, b.db.Pool.QueryRow(context.Background(),
				"SELECT payload FROM "+b.db.Schema+".tasks").Scan(&payload))
			require.Equal(t, map[string]int{"n": 2}, payload)

			// Completed: never again.
			_, err = b.store.Finish(context.Background(), b.db.Pool, "test-order-1", mustEpoch(t, b, "test-order-1"),
				[]store.Outcome{{Partition: c.Partition, OrderingID: c.OrderingID, ID: c.ID, ClaimedAt: c.ClaimedAt, Outcome: pgschedtype.OutcomeCompleted}}, store.Handover{})
			require.NoError(t, err)
			res, err = sched(t, b, task)
			require.NoError(t, err)
			require.Equal(t, pgsched.AlreadyCompleted, res, "completed key")
			require.Equal(t, 0, countRows(t, b, "tasks"))
			require.Equal(t, 0, countRows(t, b, "heads"), "a completed key leaves no head behind")

			// Past beyond the grace window: rejected, naming the limit.
			_, err = sched(t, b, pgsched.Task{OrderingID: "order-2", ScheduledAt: time.Now().Add(-time.Minute)})
			require.ErrorIs(t, err, pgsched.ErrInPast)
			require.Contains(t, err.Error(), "grace window of 00:00:05")

			// Inside the grace window: accepted.
			res, err = sched(t, b, pgsched.Task{OrderingID: "order-2", ScheduledAt: time.Now().Add(-2 * time.Second)})
			require.NoError(t, err)
			require.Equal(t, pgsched.Inserted, res)
		})
	}
}

func mustEpoch(t *testing.T, b clientBundle, node string) int64 {
	var epoch int64
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		"SELECT epoch FROM "+b.db.Schema+".nodes WHERE node_id = $1", node).Scan(&epoch))
	return epoch
}

func TestScheduleTx(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	for _, commit := range []bool{true, false} {
		tx, err := b.db.Pool.Begin(ctx)
		require.NoError(t, err)
		res, err := b.client.ScheduleTx(ctx, tx, pgsched.Task{OrderingID: fmt.Sprint("tx-", commit), ScheduledAt: time.Now().Add(time.Hour)})
		require.NoError(t, err)
		require.Equal(t, pgsched.Inserted, res)
		if commit {
			require.NoError(t, tx.Commit(ctx))
		} else {
			require.NoError(t, tx.Rollback(ctx))
		}
	}
	var ids []string
	rows, err := b.db.Pool.Query(ctx, "SELECT ordering_id FROM "+b.db.Schema+".tasks")
	require.NoError(t, err)
	ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"tx-true"}, ids)
	require.Equal(t, 1, countRows(t, b, "heads"))
}

func TestCancelAndReschedule(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	at := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	k := pgsched.Key{OrderingID: "c", ScheduledAt: at, UniquenessKey: "x"}
	_, err := b.client.Schedule(ctx, pgsched.Task{OrderingID: k.OrderingID, ScheduledAt: at, UniquenessKey: "x"})
	require.NoError(t, err)

	newAt := at.Add(time.Hour)
	require.NoError(t, b.client.Reschedule(ctx, k, newAt))
	var got time.Time
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT scheduled_at FROM "+b.db.Schema+".tasks").Scan(&got))
	require.True(t, got.Equal(newAt))
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT run_at FROM "+b.db.Schema+".heads").Scan(&got))
	require.True(t, got.Equal(newAt), "the head follows the move")

	require.ErrorIs(t, b.client.Cancel(ctx, k), pgsched.ErrNotFound, "the old key is gone")
	require.ErrorIs(t, b.client.Reschedule(ctx, pgsched.Key{OrderingID: "c", ScheduledAt: newAt, UniquenessKey: "x"}, time.Now().Add(-time.Hour)), pgsched.ErrInPast)

	k.ScheduledAt = newAt
	require.NoError(t, b.client.Cancel(ctx, k))
	require.Equal(t, 0, countRows(t, b, "tasks"))
	require.Equal(t, 0, countRows(t, b, "heads"))

	// A running task can be neither cancelled nor moved.
	now := time.Now()
	_, err = b.client.Schedule(ctx, pgsched.Task{OrderingID: "r", ScheduledAt: now})
	require.NoError(t, err)
	claimTask(t, b, "r")
	rk := pgsched.Key{OrderingID: "r", ScheduledAt: now}
	require.ErrorIs(t, b.client.Cancel(ctx, rk), pgsched.ErrTaskRunning)
	require.ErrorIs(t, b.client.Reschedule(ctx, rk, now.Add(time.Hour)), pgsched.ErrTaskRunning)
}

// TestRescheduleRacesClaim moves due tasks into the future while claimers
// run: each task must end up either claimed (and the move refused) or moved
// (and not claimed) — never both, never lost.
func TestRescheduleRacesClaim(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	const n = 300
	now := time.Now()
	tasks := make([]pgsched.Task, n)
	for i := range tasks {
		tasks[i] = pgsched.Task{OrderingID: fmt.Sprintf("race-%d", i), ScheduledAt: now}
	}
	_, err := b.client.ScheduleMany(ctx, tasks)
	require.NoError(t, err)
	lease, err := b.store.NodeRegister(ctx, b.db.Pool, "claimer", "test", time.Minute, "h", 1, false, 0)
	require.NoError(t, err)
	set, err := b.store.Settings(ctx, b.db.Pool)
	require.NoError(t, err)

	var mu sync.Mutex
	claimed := map[string]bool{}
	moved := map[string]bool{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for p := range set.PartitionCount {
					got, err := b.store.Claim(ctx, b.db.Pool, "claimer", lease.Epoch, []int32{int32((p + w) % set.PartitionCount)}, 5, 0)
					if !assertNoErr(t, err) {
						return
					}
					mu.Lock()
					for _, c := range got {
						require.False(t, claimed[c.OrderingID], "claimed twice")
						claimed[c.OrderingID] = true
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, i := range rand.Perm(n) {
		err := b.client.Reschedule(ctx, tasks[i].Key(), now.Add(time.Hour))
		if err == nil {
			mu.Lock()
			moved[tasks[i].OrderingID] = true
			mu.Unlock()
			continue
		}
		require.ErrorIs(t, err, pgsched.ErrTaskRunning)
	}
	close(stop)
	wg.Wait()

	for _, task := range tasks {
		id := task.OrderingID
		require.True(t, claimed[id] != moved[id], "%s: claimed=%v moved=%v", id, claimed[id], moved[id])
	}
	var running, future int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*) FILTER (WHERE state = 'running'), count(*) FILTER (WHERE state = 'pending' AND run_at > now()) FROM "+b.db.Schema+".tasks").Scan(&running, &future))
	require.Equal(t, len(claimed), running)
	require.Equal(t, len(moved), future)
}

func assertNoErr(t *testing.T, err error) bool {
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}

func TestPartitionParity(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	rng := rand.New(rand.NewPCG(42, 7))
	alphabet := []rune("abcXYZ019-_:/ éüß漢字🙂\u200d")
	ids := make([]string, 100_000)
	for i := range ids {
		r := make([]rune, 1+rng.IntN(40))
		for j := range r {
			r[j] = alphabet[rng.IntN(len(alphabet))]
		}
		ids[i] = string(r)
	}
	for _, count := range []int{1, 7, 64, 4096} {
		rows, err := b.db.Pool.Query(context.Background(),
			"SELECT "+b.db.Schema+".partition_of(x, $2) FROM unnest($1::text[]) WITH ORDINALITY AS u(x, i) ORDER BY i", ids, count)
		require.NoError(t, err)
		sqlParts, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		require.NoError(t, err)
		require.Len(t, sqlParts, len(ids))
		for i, id := range ids {
			if int(sqlParts[i]) != pgsched.Partition(id, count) {
				t.Fatalf("partition of %q among %d: SQL %d, Go %d", id, count, sqlParts[i], pgsched.Partition(id, count))
			}
		}
	}
}

func TestScheduleMany100k(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	at := time.Now().Add(time.Hour)
	tasks := make([]pgsched.Task, 100_000)
	for i := range tasks {
		tasks[i] = pgsched.Task{OrderingID: fmt.Sprintf("k%d", i%20_000), ScheduledAt: at.Add(time.Duration(i) * time.Microsecond), Payload: json.RawMessage(`{"i":1}`)}
	}
	res, err := b.client.ScheduleMany(context.Background(), tasks)
	require.NoError(t, err)
	require.Len(t, res, len(tasks))
	for _, r := range res {
		require.Equal(t, pgsched.Inserted, r)
	}
	require.Equal(t, 100_000, countRows(t, b, "tasks"))
	require.Equal(t, 20_000, countRows(t, b, "heads"))

	// Same keys again: all updates, still one row each.
	res, err = b.client.ScheduleMany(context.Background(), tasks[:1000])
	require.NoError(t, err)
	require.Equal(t, pgsched.Updated, res[999])
	require.Equal(t, 100_000, countRows(t, b, "tasks"))
}

// TestScheduleManyNewKeys: schedule_many's new_keys writes heads with a
// plain INSERT and refuses, writing nothing, a batch with an ordering_id
// that already has a task; the Go client then sends the batch the general
// way, also when concurrent batches race to create the same heads.
func TestScheduleManyNewKeys(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	at := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	call := func(ids []string, newKeys bool) ([]string, error) {
		ats := make([]time.Time, len(ids))
		for i := range ats {
			ats[i] = at.Add(time.Duration(i) * time.Millisecond)
		}
		var res []string
		err := b.db.Pool.QueryRow(ctx, "SELECT "+b.db.Schema+".schedule_many($1, $2, new_keys => $3)", ids, ats, newKeys).Scan(&res)
		return res, err
	}

	res, err := call([]string{"a", "b", "a"}, true)
	require.NoError(t, err)
	require.Equal(t, []string{"inserted", "inserted", "inserted"}, res, "a twice in one batch: one head and a backlog task")
	require.Equal(t, 3, countRows(t, b, "tasks"))
	require.Equal(t, 2, countRows(t, b, "heads"))

	_, err = call([]string{"c", "d", "b"}, true)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "23505", pgErr.Code, "b has a head: the promise is refused")
	require.Equal(t, 3, countRows(t, b, "tasks"), "nothing of the refused batch is written")

	res, err = call([]string{"c", "d", "b"}, false)
	require.NoError(t, err)
	require.Equal(t, []string{"inserted", "inserted", "inserted"}, res)
	require.Equal(t, 6, countRows(t, b, "tasks"))

	// Through the client: batches large enough to be sent with the promise,
	// eight at once over the same 200 ordering_ids, each at its own times:
	// all but one writer of each head are refused and sent again.
	const writers, keys = 8, 200
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tasks := make([]pgsched.Task, keys)
			for i := range tasks {
				tasks[i] = pgsched.Task{OrderingID: fmt.Sprint("k", i), ScheduledAt: at.Add(time.Duration(w*keys+i) * time.Millisecond)}
			}
			res, err := b.client.ScheduleMany(ctx, tasks)
			if err == nil && slices.ContainsFunc(res, func(r pgsched.Result) bool { return r != pgsched.Inserted }) {
				err = fmt.Errorf("results %v, want all inserted", res)
			}
			errs[w] = err
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.Equal(t, 6+writers*keys, countRows(t, b, "tasks"))
	require.Equal(t, 4+keys, countRows(t, b, "heads"))
	var misplaced int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+b.db.Schema+".heads h WHERE EXISTS (SELECT 1 FROM "+
		b.db.Schema+".backlog g WHERE g.partition_id = h.partition_id AND g.ordering_id = h.ordering_id AND (g.scheduled_at, g.uniqueness_key) < (h.scheduled_at, h.uniqueness_key))").Scan(&misplaced))
	require.Zero(t, misplaced, "every head is its ordering_id's earliest task")
}

// TestScheduledMetric: committed enqueues are counted by result; clients
// sharing a registry share the counter.
func TestScheduledMetric(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	reg := prometheus.NewRegistry()
	c1, err := pgsched.NewClient(db.Pool, pgsched.ClientConfig{Schema: db.Schema, Registerer: reg})
	require.NoError(t, err)
	c2, err := pgsched.NewClient(db.Pool, pgsched.ClientConfig{Schema: db.Schema, Registerer: reg})
	require.NoError(t, err)
	ctx := context.Background()
	at := time.Now().Add(time.Hour)
	_, err = c1.Schedule(ctx, pgsched.Task{OrderingID: "m", ScheduledAt: at})
	require.NoError(t, err)
	_, err = c2.ScheduleMany(ctx, []pgsched.Task{{OrderingID: "m", ScheduledAt: at}, {OrderingID: "n", ScheduledAt: at}})
	require.NoError(t, err)
	_, err = c1.Schedule(ctx, pgsched.Task{OrderingID: "", ScheduledAt: at})
	require.Error(t, err)

	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "pgsched_tasks_scheduled_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	require.Equal(t, map[string]float64{"inserted": 2, "updated": 1}, got)
}

// TestCancelAndRescheduleWaitOutAFinish: a cancel or reschedule that waits
// for the head's lock while a finish deletes that head and promotes the
// next task must act on the new head, not report the task missing. The
// finish here is held open in a transaction until the other call is seen
// waiting for its lock; both calls used to fail with ErrNotFound (PGS04)
// although the task they named was pending all along.
func TestCancelAndRescheduleWaitOutAFinish(t *testing.T) {
	t.Parallel()
	for _, op := range []string{"cancel", "reschedule"} {
		t.Run(op, func(t *testing.T) {
			t.Parallel()
			b := setupClient(t)
			ctx := context.Background()
			now := time.Now()
			var keys []pgsched.Key
			for i := range 3 {
				task := pgsched.Task{OrderingID: "wo", ScheduledAt: now.Add(time.Duration(i) * time.Millisecond), UniquenessKey: fmt.Sprint(i)}
				_, err := b.client.Schedule(ctx, task)
				require.NoError(t, err)
				keys = append(keys, task.Key())
			}
			c, epoch := claimTask(t, b, "wo")
			require.Equal(t, "0", c.UniquenessKey)

			tx, err := b.db.Pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			res, err := b.store.Finish(ctx, tx, "test-wo", epoch, []store.Outcome{{
				Partition: c.Partition, OrderingID: c.OrderingID, ID: c.ID, ClaimedAt: c.ClaimedAt, Outcome: pgschedtype.OutcomeCompleted,
			}}, store.Handover{})
			require.NoError(t, err)
			require.Equal(t, []int64{c.ID}, res.Applied)

			later := now.Add(time.Hour)
			done := make(chan error, 1)
			go func() {
				if op == "cancel" {
					done <- b.client.Cancel(ctx, keys[2])
				} else {
					done <- b.client.Reschedule(ctx, keys[2], later)
				}
			}()
			// The call waits for the deleted head's lock: on Citus the
			// routed statement waits on a worker, and citus_lock_waits
			// names the coordinator's statement it serves.
			waits := `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
				WHERE wait_event_type = 'Lock' AND query LIKE '%'||$1||'%')`
			if pgtest.Citus() {
				waits = `SELECT EXISTS (SELECT 1 FROM citus_lock_waits WHERE blocked_statement LIKE '%'||$1||'%')`
			}
			require.Eventually(t, func() bool {
				var waiting bool
				err := b.db.Pool.QueryRow(ctx, waits, b.db.Schema+"."+op).Scan(&waiting)
				return err == nil && waiting
			}, 10*time.Second, 2*time.Millisecond)
			require.NoError(t, tx.Commit(ctx))
			require.NoError(t, <-done)

			type row struct {
				Key   string
				Head  bool
				Sched time.Time
			}
			rows, err := b.db.Pool.Query(ctx, "SELECT uniqueness_key, head, scheduled_at FROM "+b.db.Schema+".tasks ORDER BY scheduled_at")
			require.NoError(t, err)
			got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
			require.NoError(t, err)
			want := []row{{Key: "1", Head: true, Sched: keys[1].ScheduledAt}}
			if op == "reschedule" {
				want = append(want, row{Key: "2", Sched: later})
			}
			require.Len(t, got, len(want))
			for i := range want {
				require.Equal(t, want[i].Key, got[i].Key)
				require.Equal(t, want[i].Head, got[i].Head)
				require.WithinDuration(t, want[i].Sched, got[i].Sched, time.Microsecond)
			}
		})
	}
}
