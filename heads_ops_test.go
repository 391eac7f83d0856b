package pgsched_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedtype"
)

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
			Payload: json.RawMessage(fmt.Sprintf(`{"v":%d}`, r.payloads)), Priority: r.priority(r.payloads), GroupKey: r.group(r.payloads)}
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
		if c.Priority != r.priority(t.payload) || c.GroupKey != r.group(t.payload) {
			r.fail("claimed %s with priority %d and group %q, want v%d's", k, c.Priority, c.GroupKey, t.payload)
		}
	}
}

func (r *propRun) opFinish() {
	running := r.running()
	r.rng.Shuffle(len(running), func(i, j int) { running[i], running[j] = running[j], running[i] })
	running = running[:1+r.rng.IntN(len(running))]
	set, err := r.b.store.Settings(r.ctx, r.b.db.Pool)
	r.must(err, "settings")
	outcomes := []pgschedtype.Outcome{pgschedtype.OutcomeCompleted, pgschedtype.OutcomeRetry, pgschedtype.OutcomeRelease, pgschedtype.OutcomeDead}
	var outs []store.Outcome
	var want []int64
	desc := make([]string, len(running))
	for i, k := range running {
		t := r.pending[k]
		o := store.Outcome{Partition: pgsched.Partition(k.o, set.PartitionCount), OrderingID: k.o, ID: t.id,
			ClaimedAt: t.claimedAt, Outcome: outcomes[r.rng.IntN(len(outcomes))], Error: "boom"}
		if o.Outcome == pgschedtype.OutcomeRetry && r.rng.IntN(2) == 0 {
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
		r.counts["finish/"+string(outs[i].Outcome)]++
		switch outs[i].Outcome {
		case pgschedtype.OutcomeCompleted:
			delete(r.pending, k)
			r.completed[k] = true
		case pgschedtype.OutcomeDead:
			delete(r.pending, k)
			r.dead++
		case pgschedtype.OutcomeRetry:
			t.running = false
			d := outs[i].RetryIn.Microseconds()
			t.runAtLo, t.runAtHi = t0+d, t1+d
		case pgschedtype.OutcomeRelease:
			t.running = false
			t.attempt = max(t.attempt-1, 0)
		}
	}
	// Each handed-over task follows a task finished for good in this batch
	// and is its ordering_id's earliest by (scheduled_at, id), due, and
	// now running for the node, as if claimed.
	finished := map[string]bool{}
	for i, k := range running {
		if outs[i].Outcome == pgschedtype.OutcomeCompleted || outs[i].Outcome == pgschedtype.OutcomeDead {
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
		if outs[i].Outcome == pgschedtype.OutcomeRetry || outs[i].Outcome == pgschedtype.OutcomeRelease {
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
		if r.prio && c.Priority < 1 {
			r.fail("handed over %s of priority %d while priority 1 is in use", k, c.Priority)
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
