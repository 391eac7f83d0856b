package pgsched_test

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// dbRow is a row of heads or backlog.
type dbRow struct {
	key     propKey
	id      int64
	runAt   int64
	attempt int
	payload int
	// priority and group follow from the payload's v (propRun.priority,
	// .group): written with it, they must move with it.
	priority int32
	group    string
	running  bool
	nodeID   *string
	epoch    *int64
	backlog  bool
}

func (r *propRun) readTable(table string) []dbRow {
	cols := "ordering_id, scheduled_at, uniqueness_key, id, run_at, attempt, (payload->>'v')::int, priority, coalesce(group_key, ''), "
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
	_, err = pgx.ForEachRow(rows, []any{&d.key.o, &sa, &d.key.uk, &d.id, &runAt, &d.attempt, &d.payload, &d.priority, &d.group,
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
		if d.priority != r.priority(d.payload) || d.group != r.group(d.payload) {
			r.fail("%s has priority %d and group %q, not v%d's", d.key, d.priority, d.group, d.payload)
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

// priority and group are what the run enqueues with payload v: with
// priorities, below, at and above the default, and some groups none.
func (r *propRun) priority(v int) int32 {
	if !r.prio {
		return 0
	}
	return int32(v%3) - 1
}

func (r *propRun) group(v int) string {
	if !r.prio || v%2 == 0 {
		return ""
	}
	return fmt.Sprint("g", v%5)
}
