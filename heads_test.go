package pgsched_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/store"
)

// TestHeadsBacklogInvariants runs random enqueues, cancels, reschedules,
// claims, finishes and rescues over a small key space against an in-memory
// model, and after every operation checks the heads/backlog split against
// it: every backlog ordering_id has a head, no key is in both tables, an idle
// head comes before its backlog by (scheduled_at, id), a head's backlog flag
// is false only without backlog, the stored keys are the model's, completed
// keys stay completed, and a claim takes each ordering_id's earliest task.
//
// PGSCHED_PROP_SEED=<n> runs that seed alone; PGSCHED_PROP_OPS=<n> sets the
// operations per seed.
func TestHeadsBacklogInvariants(t *testing.T) {
	t.Parallel()
	ops := 200
	if s := os.Getenv("PGSCHED_PROP_OPS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "PGSCHED_PROP_OPS")
		ops = n
	}
	seeds := []uint64{1, 2, uint64(time.Now().UnixNano())}
	if s := os.Getenv("PGSCHED_PROP_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "PGSCHED_PROP_SEED")
		seeds = []uint64{n}
	}
	for i, seed := range seeds {
		// Short subtest names: the test schema is named after the test, and
		// a schema name over 59 bytes makes its notify channel
		// ("<schema>.due") too long for pg_notify.
		t.Run(fmt.Sprint("run", i), func(t *testing.T) {
			t.Parallel()
			t.Logf("seed %d, %d operations (rerun with PGSCHED_PROP_SEED=%d)", seed, ops, seed)
			r := newPropRun(t, seed)
			for r.op = 1; r.op <= ops; r.op++ {
				r.step()
				r.check()
			}
			t.Logf("seed %d: %s", seed, r.stats())
		})
	}
}

// propKey is a task key; at is in microseconds since the epoch, as stored.
type propKey struct {
	o  string
	at int64
	uk string
}

func (k propKey) String() string { return fmt.Sprintf("(%s, %s, %q)", k.o, propTime(k.at), k.uk) }

func (k propKey) pub() pgsched.Key {
	return pgsched.Key{OrderingID: k.o, ScheduledAt: time.UnixMicro(k.at), UniquenessKey: k.uk}
}

func propTime(us int64) string { return time.UnixMicro(us).UTC().Format("15:04:05.000000") }

// propTask is the model of one pending or running task.
type propTask struct {
	id      int64 // 0 until read back after its insert
	runAt   int64 // microseconds; see runAtLo/Hi
	attempt int
	payload int
	running bool
	// claimedAt is the running claim's time, which its outcome carries.
	claimedAt time.Time
	// After a retry the database picks run_at from its clock: it must lie
	// in [runAtLo, runAtHi] and is adopted at the next check.
	runAtLo, runAtHi int64
}

type propRun struct {
	t     *testing.T
	b     clientBundle
	ctx   context.Context
	rng   *rand.Rand
	seed  uint64
	op    int
	trail []string // the last operations, for failure messages

	oids  []string
	slots []int64
	uks   []string
	parts []int32

	node  string
	epoch int64

	pending   map[propKey]*propTask // pending and running tasks
	completed map[propKey]bool
	dead      int
	payloads  int
	counts    map[string]int
}

func newPropRun(t *testing.T, seed uint64) *propRun {
	b := setupClient(t)
	ctx := context.Background()
	// A wide grace window lets tasks be scheduled in the past, so they are
	// due (and claimable) at once, and still complete after their
	// scheduled_at, as a real worker's do: the completion tombstone lookup
	// relies on that. Forcing run_at into the past instead would let tasks
	// complete before their scheduled_at.
	_, err := b.db.Pool.Exec(ctx, "UPDATE "+b.db.Schema+".settings SET grace = '1 hour'")
	require.NoError(t, err)
	set, err := b.store.Settings(ctx, b.db.Pool)
	require.NoError(t, err)

	r := &propRun{
		t: t, b: b, ctx: ctx, seed: seed,
		rng:       rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		oids:      []string{"o0", "o1", "o2", "o3", "o4", "o5"},
		uks:       []string{"", "a", "b"},
		node:      "prop-node",
		pending:   map[propKey]*propTask{},
		completed: map[propKey]bool{},
		counts:    map[string]int{},
	}
	// Six past times (due now) and two future ones (never due in the test).
	now := time.Now().Truncate(time.Second)
	for i := range 6 {
		r.slots = append(r.slots, now.Add(-10*time.Minute+time.Duration(i)*time.Second).UnixMicro())
	}
	for i := range 2 {
		r.slots = append(r.slots, now.Add(10*time.Minute+time.Duration(i)*time.Second).UnixMicro())
	}
	seen := map[int32]bool{}
	for _, o := range r.oids {
		p := int32(pgsched.Partition(o, set.PartitionCount))
		if !seen[p] {
			seen[p] = true
			r.parts = append(r.parts, p)
		}
	}
	lease, err := b.store.NodeRegister(ctx, b.db.Pool, r.node, "test", 10*time.Minute, "host", 1, false, 0)
	require.NoError(t, err)
	r.epoch = lease.Epoch
	return r
}

func (r *propRun) fail(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("seed %d, operation %d: %s\nlast operations:\n  %s\n%s", r.seed, r.op,
		fmt.Sprintf(format, args...), strings.Join(r.trail, "\n  "), r.dump())
}

func (r *propRun) must(err error, what string) {
	r.t.Helper()
	if err != nil {
		r.fail("%s: %v", what, err)
	}
}

func (r *propRun) note(format string, args ...any) {
	r.trail = append(r.trail, fmt.Sprintf("#%d ", r.op)+fmt.Sprintf(format, args...))
	if len(r.trail) > 12 {
		r.trail = r.trail[1:]
	}
}

func (r *propRun) stats() string {
	keys := make([]string, 0, len(r.counts))
	for k := range r.counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "%s=%d ", k, r.counts[k])
	}
	return sb.String()
}

func (r *propRun) randKey() propKey {
	return propKey{o: r.oids[r.rng.IntN(len(r.oids))], at: r.slots[r.rng.IntN(len(r.slots))], uk: r.uks[r.rng.IntN(len(r.uks))]}
}

// pickKey returns a key of a pending or running task, a completed one or a
// random one.
func (r *propRun) pickKey() propKey {
	switch x := r.rng.IntN(4); {
	case x < 2 && len(r.pending) > 0:
		return sortedKeys(r.pending)[r.rng.IntN(len(r.pending))]
	case x == 2 && len(r.completed) > 0:
		return sortedKeys(r.completed)[r.rng.IntN(len(r.completed))]
	}
	return r.randKey()
}

func sortedKeys[V any](m map[propKey]V) []propKey {
	ks := make([]propKey, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b propKey) int {
		return cmp.Or(cmp.Compare(a.o, b.o), cmp.Compare(a.at, b.at), cmp.Compare(a.uk, b.uk))
	})
	return ks
}

func (r *propRun) running() []propKey {
	var ks []propKey
	for _, k := range sortedKeys(r.pending) {
		if r.pending[k].running {
			ks = append(ks, k)
		}
	}
	return ks
}

func (r *propRun) hasTasks(o string) bool {
	for k := range r.pending {
		if k.o == o {
			return true
		}
	}
	return false
}

func (r *propRun) step() {
	switch x := r.rng.IntN(100); {
	case x < 30:
		r.opSchedule()
	case x < 42:
		r.opCancel()
	case x < 60:
		r.opReschedule()
	case x < 76:
		r.opClaim()
	case x < 97:
		if len(r.running()) == 0 {
			r.opClaim()
		} else {
			r.opFinish()
		}
	default:
		r.opRescue()
	}
}

// errKind names the sentinel an error is, for comparing with the model.
func errKind(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, pgsched.ErrNotFound):
		return "not found"
	case errors.Is(err, pgsched.ErrTaskRunning):
		return "running"
	case errors.Is(err, pgsched.ErrKeyExists):
		return "key exists"
	case errors.Is(err, pgsched.ErrInPast):
		return "in past"
	case errors.Is(err, pgsched.ErrInvalidTask):
		return "invalid"
	}
	return "other: " + err.Error()
}

func (r *propRun) opSchedule() {
	n := 1 + r.rng.IntN(8)
	tasks := make([]pgsched.Task, n)
	keys := make([]propKey, n)
	desc := make([]string, n)
	for i := range tasks {
		k := r.randKey()
		if r.rng.IntN(3) == 0 {
			k = r.pickKey()
		}
		if i > 0 && r.rng.IntN(8) == 0 {
			k = keys[r.rng.IntN(i)] // the same key twice in one batch
		}
		r.payloads++
		keys[i] = k
		tasks[i] = pgsched.Task{OrderingID: k.o, ScheduledAt: time.UnixMicro(k.at), UniquenessKey: k.uk,
			Payload: json.RawMessage(fmt.Sprintf(`{"v":%d}`, r.payloads))}
		desc[i] = fmt.Sprintf("%s v%d", k, r.payloads)
	}
	r.note("schedule_many [%s]", strings.Join(desc, ", "))

	want := make([]pgsched.Result, n)
	wantErr := "ok"
	for i, k := range keys {
		switch t := r.pending[k]; {
		case r.completed[k]:
			want[i] = pgsched.AlreadyCompleted
		case t != nil && t.running:
			wantErr = "running"
		case t != nil:
			want[i] = pgsched.Updated
		default:
			want[i] = pgsched.Inserted
		}
	}
	got, err := r.b.client.ScheduleMany(r.ctx, tasks)
	if errKind(err) != wantErr {
		r.fail("schedule_many: got error %v, want %s", err, wantErr)
	}
	r.counts["schedule/"+wantErr]++
	if err != nil {
		return
	}
	if !slices.Equal(got, want) {
		r.fail("schedule_many results %v, want %v", got, want)
	}
	for i, k := range keys {
		if want[i] == pgsched.AlreadyCompleted {
			r.counts["schedule/already_completed"]++
			continue
		}
		t := r.pending[k]
		if t == nil {
			t = &propTask{runAt: k.at}
			r.pending[k] = t
		}
		t.payload = r.payloads - n + i + 1 // the last of a key in the batch wins
	}
}

func (r *propRun) opCancel() {
	k := r.pickKey()
	r.note("cancel %s", k)
	want := "ok"
	switch t := r.pending[k]; {
	case t == nil:
		want = "not found"
	case t.running:
		want = "running"
	}
	err := r.b.client.Cancel(r.ctx, k.pub())
	if errKind(err) != want {
		r.fail("cancel %s: got error %v, want %s", k, err, want)
	}
	r.counts["cancel/"+want]++
	if err == nil {
		delete(r.pending, k)
	}
}

func (r *propRun) opReschedule() {
	k := r.pickKey()
	newAt := r.slots[r.rng.IntN(len(r.slots))]
	nk := propKey{o: k.o, at: newAt, uk: k.uk}
	r.note("reschedule %s to %s", k, propTime(newAt))
	// The checks in the order pgsched.reschedule makes them.
	want := "ok"
	t := r.pending[k]
	switch {
	case !r.hasTasks(k.o):
		want = "not found"
	case t != nil && t.running:
		want = "running"
	case newAt != k.at && (r.pending[nk] != nil || r.completed[nk]):
		want = "key exists"
	case t == nil:
		want = "not found"
	}
	err := r.b.client.Reschedule(r.ctx, k.pub(), time.UnixMicro(newAt))
	if errKind(err) != want {
		r.fail("reschedule %s to %s: got error %v, want %s", k, propTime(newAt), err, want)
	}
	r.counts["reschedule/"+want]++
	if err != nil {
		return
	}
	delete(r.pending, k)
	t.runAt = newAt
	t.runAtLo, t.runAtHi = 0, 0
	r.pending[nk] = t
}

func (r *propRun) dbNow() int64 {
	var now time.Time
	r.must(r.b.db.Pool.QueryRow(r.ctx, "SELECT clock_timestamp()").Scan(&now), "reading the clock")
	return now.UnixMicro()
}

// viewRow is a row of the tasks view.
type viewRow struct {
	key     propKey
	id      int64
	running bool
	head    bool
	runAt   int64
}

func (r *propRun) readView() []viewRow {
	rows, err := r.b.db.Pool.Query(r.ctx, "SELECT ordering_id, scheduled_at, uniqueness_key, id, state, head, run_at FROM "+
		r.b.db.Schema+".tasks")
	r.must(err, "reading the tasks view")
	var out []viewRow
	var sa, runAt time.Time
	var state string
	var v viewRow
	_, err = pgx.ForEachRow(rows, []any{&v.key.o, &sa, &v.key.uk, &v.id, &state, &v.head, &runAt}, func() error {
		v.key.at, v.runAt, v.running = sa.UnixMicro(), runAt.UnixMicro(), state == "running"
		out = append(out, v)
		return nil
	})
	r.must(err, "reading the tasks view")
	return out
}

func (r *propRun) opClaim() {
	max := 1 + r.rng.IntN(6)
	parts := slices.Clone(r.parts)
	r.rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	r.note("claim max %d from partitions %v", max, parts)

	// Before: each ordering_id's earliest task by (scheduled_at, id) and
	// whether one runs, from the tasks view; the idle heads due by now.
	view := r.readView()
	earliest := map[string]viewRow{}
	busy := map[string]bool{}
	for _, v := range view {
		if v.running {
			busy[v.key.o] = true
			continue
		}
		e, ok := earliest[v.key.o]
		if !ok || v.key.at < e.key.at || (v.key.at == e.key.at && v.id < e.id) {
			earliest[v.key.o] = v
		}
	}
	t0 := r.dbNow()
	due := 0
	for _, v := range view {
		if v.head && !v.running && v.runAt <= t0 {
			due++
		}
	}

	got, err := r.b.store.Claim(r.ctx, r.b.db.Pool, r.node, r.epoch, parts, max, 0)
	r.must(err, "claim")
	t1 := r.dbNow()
	if len(got) > max || len(got) < min(max, due) {
		r.fail("claimed %d tasks with max %d and %d idle heads due", len(got), max, due)
	}
	r.counts["claimed"] += len(got)
	for _, c := range got {
		k := propKey{o: c.OrderingID, at: c.ScheduledAt.UnixMicro(), uk: c.UniquenessKey}
		r.note("  claimed %s id %d", k, c.ID)
		if busy[c.OrderingID] {
			r.fail("claimed %s id %d while ordering_id %s already had a running task", k, c.ID, c.OrderingID)
		}
		busy[c.OrderingID] = true
		e, ok := earliest[c.OrderingID]
		if !ok || e.key != k || e.id != c.ID {
			r.fail("claimed %s id %d, but the earliest pending task of %s by (scheduled_at, id) was %s id %d",
				k, c.ID, c.OrderingID, e.key, e.id)
		}
		if c.RunAt.UnixMicro() > t1 {
			r.fail("claimed %s whose run_at %s is not due", k, propTime(c.RunAt.UnixMicro()))
		}
		t := r.pending[k]
		if t == nil {
			r.fail("claimed %s, which the model does not have", k)
		}
		t.running, t.claimedAt = true, c.ClaimedAt
		t.attempt++
		if c.Attempt != t.attempt {
			r.fail("claimed %s at attempt %d, want %d", k, c.Attempt, t.attempt)
		}
	}
}

func (r *propRun) opFinish() {
	running := r.running()
	r.rng.Shuffle(len(running), func(i, j int) { running[i], running[j] = running[j], running[i] })
	running = running[:1+r.rng.IntN(len(running))]
	set, err := r.b.store.Settings(r.ctx, r.b.db.Pool)
	r.must(err, "settings")
	outcomes := []string{store.OutcomeCompleted, store.OutcomeRetry, store.OutcomeRelease, store.OutcomeDead}
	var outs []store.Outcome
	var want []int64
	desc := make([]string, len(running))
	for i, k := range running {
		t := r.pending[k]
		o := store.Outcome{Partition: pgsched.Partition(k.o, set.PartitionCount), OrderingID: k.o, ID: t.id,
			ClaimedAt: t.claimedAt, Outcome: outcomes[r.rng.IntN(len(outcomes))], Error: "boom"}
		if o.Outcome == store.OutcomeRetry && r.rng.IntN(2) == 0 {
			o.RetryIn = time.Hour
		}
		outs = append(outs, o)
		want = append(want, t.id)
		desc[i] = fmt.Sprintf("%s id %d %s", k, t.id, o.Outcome)
		if o.RetryIn > 0 {
			desc[i] += " in " + o.RetryIn.String()
		}
	}
	// Now and then a stale epoch: nothing may change.
	stale := r.rng.IntN(10) == 0
	epoch := r.epoch
	if stale {
		epoch--
	}
	// Half the finishes may hand due successors over to the node, as a
	// worker's do, within a random room and run limit.
	var hand store.Handover
	if r.rng.IntN(2) == 0 {
		hand = store.Handover{Max: 1 + r.rng.IntN(len(outs)), Partitions: r.parts, Limit: 1 + r.rng.IntN(4)}
	}
	r.note("finish (stale %v, hand over %d, run limit %d) [%s]", stale, hand.Max, hand.Limit, strings.Join(desc, ", "))
	t0 := r.dbNow()
	res, err := r.b.store.Finish(r.ctx, r.b.db.Pool, r.node, epoch, outs, hand)
	r.must(err, "finish")
	applied, next := res.Applied, res.HandedOver
	t1 := r.dbNow()
	if stale {
		if len(applied) != 0 || len(next) != 0 || res.Claimable != 0 {
			r.fail("finish with a stale epoch changed %v, handed over %d and left %d claimable", applied, len(next), res.Claimable)
		}
		r.counts["finish/stale"]++
		return
	}
	if len(next) > hand.Max {
		r.fail("finish handed over %d tasks with room for %d", len(next), hand.Max)
	}
	slices.Sort(applied)
	slices.Sort(want)
	if !slices.Equal(applied, want) {
		r.fail("finish changed ids %v, want %v", applied, want)
	}
	for i, k := range running {
		t := r.pending[k]
		r.counts["finish/"+outs[i].Outcome]++
		switch outs[i].Outcome {
		case store.OutcomeCompleted:
			delete(r.pending, k)
			r.completed[k] = true
		case store.OutcomeDead:
			delete(r.pending, k)
			r.dead++
		case store.OutcomeRetry:
			t.running = false
			d := outs[i].RetryIn.Microseconds()
			t.runAtLo, t.runAtHi = t0+d, t1+d
		case store.OutcomeRelease:
			t.running = false
			t.attempt = max(t.attempt-1, 0)
		}
	}
	// Each handed-over task follows a task finished for good in this batch
	// and is its ordering_id's earliest by (scheduled_at, id), due, and
	// now running for the node, as if claimed.
	finished := map[string]bool{}
	for i, k := range running {
		if outs[i].Outcome == store.OutcomeCompleted || outs[i].Outcome == store.OutcomeDead {
			finished[k.o] = true
		}
	}
	// What the finish says it left for a claim: every promoted successor
	// not handed over, and every task given back. A worker looks for due
	// work only when this is not zero, so it must never say less; it may
	// say more by the ordering_ids that ran out of tasks (a head's backlog
	// flag may still say there is one after a cancel emptied it).
	claimable, emptied := -len(next), 0
	left := map[string]bool{}
	for k := range r.pending {
		left[k.o] = true
	}
	for o := range finished {
		if left[o] {
			claimable++
		} else {
			emptied++
		}
	}
	for i := range running {
		if outs[i].Outcome == store.OutcomeRetry || outs[i].Outcome == store.OutcomeRelease {
			claimable++
		}
	}
	if res.Claimable < claimable || res.Claimable > claimable+emptied {
		r.fail("finish says it left %d heads for a claim, want %d (up to %d more)", res.Claimable, claimable, emptied)
	}
	r.counts["handed over"] += len(next)
	for _, c := range next {
		k := propKey{o: c.OrderingID, at: c.ScheduledAt.UnixMicro(), uk: c.UniquenessKey}
		r.note("  handed over %s id %d", k, c.ID)
		if !finished[c.OrderingID] {
			r.fail("handed over %s id %d, but no task of %s finished in the batch", k, c.ID, c.OrderingID)
		}
		delete(finished, c.OrderingID)
		t := r.pending[k]
		if t == nil || t.running {
			r.fail("handed over %s id %d, which the model does not have idle", k, c.ID)
		}
		for ok, ot := range r.pending {
			if ok.o == k.o && ok != k && (ok.at < k.at || (ok.at == k.at && ot.id < c.ID)) {
				r.fail("handed over %s id %d, but %s id %d of the same ordering_id comes first", k, c.ID, ok, ot.id)
			}
		}
		if c.RunAt.UnixMicro() > t1 {
			r.fail("handed over %s whose run_at %s is not due", k, propTime(c.RunAt.UnixMicro()))
		}
		t.running, t.claimedAt = true, c.ClaimedAt
		t.attempt++
		if c.Attempt != t.attempt {
			r.fail("handed over %s at attempt %d, want %d", k, c.Attempt, t.attempt)
		}
	}
}

// opRescue lets the node's lease lapse, rescues its tasks and registers it
// again with a new epoch.
func (r *propRun) opRescue() {
	r.note("rescue (%d running)", len(r.running()))
	_, err := r.b.db.Pool.Exec(r.ctx, "UPDATE "+r.b.db.Schema+".nodes SET lease_expires_at = now() - interval '1 second' WHERE node_id = $1", r.node)
	r.must(err, "expiring the lease")
	n, err := r.b.store.RescueExpired(r.ctx, r.b.db.Pool, nil)
	r.must(err, "rescue")
	if n != len(r.running()) {
		r.fail("rescued %d tasks, want %d", n, len(r.running()))
	}
	r.counts["rescued"] += n
	for _, k := range r.running() {
		r.pending[k].running = false
	}
	lease, err := r.b.store.NodeRegister(r.ctx, r.b.db.Pool, r.node, "test", 10*time.Minute, "host", 1, false, 0)
	r.must(err, "registering again")
	r.epoch = lease.Epoch
}

// dbRow is a row of heads or backlog.
type dbRow struct {
	key     propKey
	id      int64
	runAt   int64
	attempt int
	payload int
	running bool
	nodeID  *string
	epoch   *int64
	backlog bool
}

func (r *propRun) readTable(table string) []dbRow {
	cols := "ordering_id, scheduled_at, uniqueness_key, id, run_at, attempt, (payload->>'v')::int, "
	if table == "heads" {
		cols += "running, node_id, epoch, backlog"
	} else {
		cols += "false, NULL::text, NULL::bigint, false"
	}
	rows, err := r.b.db.Pool.Query(r.ctx, "SELECT "+cols+" FROM "+r.b.db.Schema+"."+table+" ORDER BY ordering_id, scheduled_at, id")
	r.must(err, "reading "+table)
	var out []dbRow
	var sa, runAt time.Time
	var d dbRow
	_, err = pgx.ForEachRow(rows, []any{&d.key.o, &sa, &d.key.uk, &d.id, &runAt, &d.attempt, &d.payload,
		&d.running, &d.nodeID, &d.epoch, &d.backlog}, func() error {
		d.key.at, d.runAt = sa.UnixMicro(), runAt.UnixMicro()
		out = append(out, d)
		return nil
	})
	r.must(err, "reading "+table)
	return out
}

// dump renders both tables and the model for failure messages. It must not
// call fail (which calls it).
func (r *propRun) dump() string {
	var sb strings.Builder
	for _, table := range []string{"heads", "backlog"} {
		flags := "false, false"
		if table == "heads" {
			flags = "running, backlog"
		}
		rows, err := r.b.db.Pool.Query(r.ctx, "SELECT ordering_id, scheduled_at, uniqueness_key, id, run_at, attempt, (payload->>'v')::int, "+
			flags+" FROM "+r.b.db.Schema+"."+table+" ORDER BY ordering_id, scheduled_at, id")
		if err != nil {
			return "(dump failed: " + err.Error() + ")"
		}
		fmt.Fprintf(&sb, "%s:\n", table)
		var o, uk string
		var sa, runAt time.Time
		var id int64
		var attempt, v int
		var running, backlog bool
		_, err = pgx.ForEachRow(rows, []any{&o, &sa, &uk, &id, &runAt, &attempt, &v, &running, &backlog}, func() error {
			fmt.Fprintf(&sb, "  %s id %d run_at %s attempt %d v%d", propKey{o, sa.UnixMicro(), uk}, id, propTime(runAt.UnixMicro()), attempt, v)
			if table == "heads" {
				fmt.Fprintf(&sb, " running %v backlog %v", running, backlog)
			}
			sb.WriteString("\n")
			return nil
		})
		if err != nil {
			return "(dump failed: " + err.Error() + ")"
		}
	}
	sb.WriteString("model:\n")
	for _, k := range sortedKeys(r.pending) {
		t := r.pending[k]
		fmt.Fprintf(&sb, "  %s id %d run_at %s attempt %d v%d running %v\n", k, t.id, propTime(t.runAt), t.attempt, t.payload, t.running)
	}
	return sb.String()
}

// check compares the database with the model and checks the invariants of
// the heads/backlog split.
func (r *propRun) check() {
	r.t.Helper()
	heads := r.readTable("heads")
	backlog := r.readTable("backlog")

	head := map[string]dbRow{}
	for _, h := range heads {
		if _, dup := head[h.key.o]; dup {
			r.fail("two heads for %s", h.key.o)
		}
		head[h.key.o] = h
		if h.running && (h.nodeID == nil || *h.nodeID != r.node || h.epoch == nil || *h.epoch != r.epoch) {
			r.fail("running head %s held by %v/%v, want %s/%d", h.key, h.nodeID, h.epoch, r.node, r.epoch)
		}
	}
	inHeads := map[propKey]bool{}
	for _, h := range heads {
		inHeads[h.key] = true
	}
	hasBacklog := map[string]bool{}
	for _, b := range backlog {
		hasBacklog[b.key.o] = true
		h, ok := head[b.key.o]
		if !ok { // (a)
			r.fail("backlog task %s id %d has no head", b.key, b.id)
		}
		if inHeads[b.key] { // (b)
			r.fail("%s is in heads and backlog", b.key)
		}
		if !h.running && (b.key.at < h.key.at || (b.key.at == h.key.at && b.id < h.id)) { // (c)
			r.fail("idle head %s id %d comes after backlog task %s id %d", h.key, h.id, b.key, b.id)
		}
	}
	for _, h := range heads { // (d)
		if !h.backlog && hasBacklog[h.key.o] {
			r.fail("head %s has backlog = false but %s has backlog tasks", h.key, h.key.o)
		}
	}

	// (e) The stored tasks are the model's, with their ids, times, attempts
	// and payloads; the running ones are heads.
	all := append(slices.Clone(heads), backlog...)
	ids := map[int64]propKey{}
	stored := map[propKey]bool{}
	for _, d := range all {
		if k, dup := ids[d.id]; dup {
			r.fail("id %d is both %s and %s", d.id, k, d.key)
		}
		ids[d.id] = d.key
		stored[d.key] = true
		t := r.pending[d.key]
		if t == nil {
			if r.completed[d.key] {
				r.fail("completed key %s is stored again (id %d)", d.key, d.id)
			}
			r.fail("%s id %d is stored but the model has no such task", d.key, d.id)
		}
		if t.id == 0 {
			t.id = d.id
		} else if t.id != d.id {
			r.fail("%s has id %d, want %d (ids stay with their task)", d.key, d.id, t.id)
		}
		if t.runAtHi != 0 {
			if d.runAt < t.runAtLo || d.runAt > t.runAtHi {
				r.fail("retried %s has run_at %s, want between %s and %s", d.key, propTime(d.runAt), propTime(t.runAtLo), propTime(t.runAtHi))
			}
			t.runAt, t.runAtLo, t.runAtHi = d.runAt, 0, 0
		}
		if d.runAt != t.runAt {
			r.fail("%s has run_at %s, want %s", d.key, propTime(d.runAt), propTime(t.runAt))
		}
		if d.attempt != t.attempt {
			r.fail("%s has attempt %d, want %d", d.key, d.attempt, t.attempt)
		}
		if d.payload != t.payload {
			r.fail("%s has payload v%d, want v%d", d.key, d.payload, t.payload)
		}
		if d.running != t.running {
			r.fail("%s running = %v, want %v", d.key, d.running, t.running)
		}
	}
	for k := range r.pending {
		if !stored[k] {
			r.fail("the model has %s but the database does not", k)
		}
	}
	// Each ordering_id's head is its running task, else its earliest.
	for o, h := range head {
		for k, t := range r.pending {
			if k.o == o && t.running && k != h.key {
				r.fail("%s runs but the head of %s is %s", k, o, h.key)
			}
		}
	}

	// (g) A head's known successors (next_tids, next_ids) are the first
	// backlog rows of its ordering_id in run order, by ctid and id, and
	// next_more says whether any follow them.
	type tidID struct {
		tid string
		id  int64
	}
	queue := map[string][]tidID{}
	rows, err := r.b.db.Pool.Query(r.ctx, "SELECT ordering_id, ctid::text, id FROM "+r.b.db.Schema+".backlog ORDER BY ordering_id, scheduled_at, id")
	r.must(err, "reading backlog ctids")
	for rows.Next() {
		var o string
		var x tidID
		if err := rows.Scan(&o, &x.tid, &x.id); err != nil {
			rows.Close()
			r.must(err, "scanning backlog ctids")
		}
		queue[o] = append(queue[o], x)
	}
	r.must(rows.Err(), "reading backlog ctids")
	type known struct {
		o             string
		tids          []string
		ids           []int64
		more, backlog bool
		noTids, noIDs bool
	}
	var knowns []known
	rows, err = r.b.db.Pool.Query(r.ctx, "SELECT ordering_id, coalesce(next_tids::text[], '{}'), coalesce(next_ids, '{}'), next_more, backlog, "+
		"next_tids IS NULL, next_ids IS NULL FROM "+r.b.db.Schema+".heads")
	r.must(err, "reading known successors")
	for rows.Next() {
		var k known
		if err := rows.Scan(&k.o, &k.tids, &k.ids, &k.more, &k.backlog, &k.noTids, &k.noIDs); err != nil {
			rows.Close()
			r.must(err, "scanning known successors")
		}
		knowns = append(knowns, k)
	}
	r.must(rows.Err(), "reading known successors")
	for _, k := range knowns {
		if k.noTids && k.noIDs {
			continue
		}
		r.counts["known successors"]++
		o, tids, ids, q := k.o, k.tids, k.ids, queue[k.o]
		switch {
		case k.noTids != k.noIDs || len(tids) != len(ids) || len(tids) == 0:
			r.fail("head of %s knows successor ctids %v and ids %v", o, tids, ids)
		case len(tids) > len(q):
			r.fail("head of %s knows %d successors, %d are queued", o, len(tids), len(q))
		case k.more != (len(q) > len(tids)):
			r.fail("head of %s knows %d successors with next_more %v, and %d tasks are queued", o, len(tids), k.more, len(q))
		case !k.backlog:
			r.fail("head of %s knows successors but says it has no backlog", o)
		}
		for i := range tids {
			if q[i].tid != tids[i] || q[i].id != ids[i] {
				r.fail("head of %s knows successor %d as %s id %d; the backlog's is %s id %d", o, i+1, tids[i], ids[i], q[i].tid, q[i].id)
			}
		}
	}

	// (f) A completion writes one tombstone, a dead task one row; enqueuing
	// a completed key again writes nothing.
	var completions, dead int
	r.must(r.b.db.Pool.QueryRow(r.ctx, "SELECT (SELECT count(*) FROM "+r.b.db.Schema+".completions), (SELECT count(*) FROM "+
		r.b.db.Schema+".dead_tasks)").Scan(&completions, &dead), "counting completions")
	if completions != len(r.completed) || dead != r.dead {
		r.fail("%d completions and %d dead tasks stored, want %d and %d", completions, dead, len(r.completed), r.dead)
	}
}

// TestSettleAfterEarlierEnqueue: a task enqueued before an ordering_id's head
// takes its place when the head is idle, and waits in the backlog until the
// head finishes when it runs.
func TestSettleAfterEarlierEnqueue(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	_, err := b.db.Pool.Exec(ctx, "UPDATE "+b.db.Schema+".settings SET grace = '1 hour'")
	require.NoError(t, err)
	t2 := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
	t1 := t2.Add(-time.Second)

	type row struct {
		at      time.Time
		id      int64
		running bool
		backlog bool
	}
	headOf := func(o string) row {
		t.Helper()
		var h row
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT scheduled_at, id, running, backlog FROM "+b.db.Schema+".heads WHERE ordering_id = $1", o).
			Scan(&h.at, &h.id, &h.running, &h.backlog))
		return h
	}
	backlogOf := func(o string) []time.Time {
		t.Helper()
		rows, err := b.db.Pool.Query(ctx, "SELECT scheduled_at FROM "+b.db.Schema+".backlog WHERE ordering_id = $1 ORDER BY scheduled_at", o)
		require.NoError(t, err)
		ats, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
		require.NoError(t, err)
		return ats
	}
	schedule := func(o string, at time.Time) {
		t.Helper()
		res, err := b.client.Schedule(ctx, pgsched.Task{OrderingID: o, ScheduledAt: at})
		require.NoError(t, err)
		require.Equal(t, pgsched.Inserted, res)
	}
	finish := func(c store.Claimed, epoch int64, outcome string) {
		t.Helper()
		res, err := b.store.Finish(ctx, b.db.Pool, "test-"+c.OrderingID, epoch, []store.Outcome{{
			Partition: c.Partition, OrderingID: c.OrderingID, ID: c.ID, ClaimedAt: c.ClaimedAt, Outcome: outcome,
		}}, store.Handover{})
		require.NoError(t, err)
		require.Equal(t, []int64{c.ID}, res.Applied)
	}
	noTasks := func(o string) {
		t.Helper()
		var n int
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+b.db.Schema+".tasks WHERE ordering_id = $1", o).Scan(&n))
		require.Zero(t, n)
	}

	t.Run("idle head", func(t *testing.T) {
		schedule("idle", t2)
		h := headOf("idle")
		require.True(t, h.at.Equal(t2))
		require.False(t, h.backlog, "no backlog yet")

		schedule("idle", t1)
		h = headOf("idle")
		require.True(t, h.at.Equal(t1), "the earlier task is the head")
		require.True(t, h.backlog)
		require.Len(t, backlogOf("idle"), 1)
		require.True(t, backlogOf("idle")[0].Equal(t2), "the old head waits in the backlog")

		c, epoch := claimTask(t, b, "idle")
		require.True(t, c.ScheduledAt.Equal(t1), "the earlier task runs first")
		finish(c, epoch, store.OutcomeCompleted)
		h = headOf("idle")
		require.True(t, h.at.Equal(t2))
		require.False(t, h.running)
		require.False(t, h.backlog)
		require.Empty(t, backlogOf("idle"))

		c, epoch = claimTask(t, b, "idle")
		require.True(t, c.ScheduledAt.Equal(t2))
		finish(c, epoch, store.OutcomeCompleted)
		noTasks("idle")
	})

	t.Run("running head", func(t *testing.T) {
		schedule("busy", t2)
		c2, epoch2 := claimTask(t, b, "busy")
		require.True(t, c2.ScheduledAt.Equal(t2))

		schedule("busy", t1)
		h := headOf("busy")
		require.True(t, h.at.Equal(t2), "a running head stays")
		require.True(t, h.running)
		require.True(t, h.backlog)
		require.Len(t, backlogOf("busy"), 1)
		require.True(t, backlogOf("busy")[0].Equal(t1), "the earlier task waits")

		finish(c2, epoch2, store.OutcomeCompleted)
		h = headOf("busy")
		require.True(t, h.at.Equal(t1), "the earlier task is next")
		require.False(t, h.running)
		require.False(t, h.backlog)
		require.Empty(t, backlogOf("busy"))

		c1, epoch1 := claimTask(t, b, "busy")
		require.True(t, c1.ScheduledAt.Equal(t1))
		finish(c1, epoch1, store.OutcomeCompleted)
		noTasks("busy")
	})

	// Given back (release or retry), the running head goes behind the
	// earlier task enqueued meanwhile.
	for _, outcome := range []string{store.OutcomeRelease, store.OutcomeRetry} {
		t.Run("running head "+outcome, func(t *testing.T) {
			o := "back-" + outcome
			schedule(o, t2)
			c2, epoch2 := claimTask(t, b, o)
			schedule(o, t1)
			finish(c2, epoch2, outcome)
			h := headOf(o)
			require.True(t, h.at.Equal(t1), "the earlier task runs first")
			require.False(t, h.running)
			require.True(t, h.backlog)
			require.Len(t, backlogOf(o), 1)
			require.True(t, backlogOf(o)[0].Equal(t2))

			c1, epoch1 := claimTask(t, b, o)
			require.True(t, c1.ScheduledAt.Equal(t1))
			finish(c1, epoch1, store.OutcomeCompleted)
			h = headOf(o)
			require.True(t, h.at.Equal(t2))
			require.False(t, h.backlog)
			c2, epoch2 = claimTask(t, b, o)
			require.True(t, c2.ScheduledAt.Equal(t2))
			if outcome == store.OutcomeRelease {
				require.Equal(t, 1, c2.Attempt, "a released run does not count")
			} else {
				require.Equal(t, 2, c2.Attempt, "its second attempt")
			}
			finish(c2, epoch2, store.OutcomeCompleted)
			noTasks(o)
		})
	}
}

// TestEnqueueOrderAcrossConnections: tasks of one ordering_id with the same
// scheduled_at run in enqueue order even when enqueued over different
// connections (each pooled connection caching its own block of task ids
// once put a later enqueue first).
func TestEnqueueOrderAcrossConnections(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	at := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	a, err := b.db.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer a.Release()
	c, err := b.db.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer c.Release()
	schedule := func(conn *pgxpool.Conn, o, uk string) {
		t.Helper()
		_, err := conn.Exec(ctx, "SELECT "+b.db.Schema+".schedule($1, $2, $3)", o, at, uk)
		require.NoError(t, err)
	}
	// Each connection takes ids once before the interleaved enqueues.
	schedule(a, "warm-a", "")
	schedule(c, "warm-c", "")
	for i := range 5 {
		conn := a
		if i%2 == 1 {
			conn = c
		}
		schedule(conn, "o", fmt.Sprintf("k%d", i))
	}
	rows, err := b.db.Pool.Query(ctx, "SELECT uniqueness_key FROM "+b.db.Schema+".tasks WHERE ordering_id = 'o' ORDER BY scheduled_at, id")
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"k0", "k1", "k2", "k3", "k4"}, got, "run order is enqueue order")
}
