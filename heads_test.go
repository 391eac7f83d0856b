package pgsched_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
)

// TestHeadsBacklogInvariants runs random enqueues, cancels, reschedules,
// claims, finishes and rescues over a small key space against an in-memory
// model, and after every operation checks the heads/backlog split against
// it: every backlog ordering_id has a head, no key is in both tables, an idle
// head comes before its backlog by (scheduled_at, id), a head's backlog flag
// is false only without backlog, the stored keys are the model's, completed
// keys stay completed, and a claim takes each ordering_id's earliest task.
// Runs with an even seed enqueue with priorities and groups: each task's
// stay with it wherever it moves, and only the highest is handed over.
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
	// prio: the run enqueues with priorities and groups (even seeds), so
	// they must move with their tasks and hand-overs follow the priority
	// rule; odd seeds keep the default, so every due successor may be
	// handed over.
	prio bool
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
		t: t, b: b, ctx: ctx, seed: seed, prio: seed%2 == 0,
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
