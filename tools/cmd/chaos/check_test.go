package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

var base = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

// task is the n-th task of ordering_id id, due n seconds after base.
func task(id string, n int) Key {
	return keyOf(id, base.Add(time.Duration(n)*time.Second), id+string(rune('0'+n)))
}

// deliver is a delivery of task(id, n) by node from ms to ms+5 after base.
func deliver(node, id string, n, ms, status int) Delivery {
	k := task(id, n)
	return Delivery{
		Node: node, OrderingID: id, ScheduledAt: time.UnixMicro(k.At), UniquenessKey: k.UniquenessKey,
		Attempt: 1, Start: at(ms), End: at(ms + 5), Status: status,
	}
}

func at(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }

func TestCheck(t *testing.T) {
	t.Parallel()
	enqueued := []Key{task("a", 0), task("a", 1), task("a", 2), task("b", 0)}
	clean := []Delivery{
		deliver("w1", "a", 0, 0, 200),
		deliver("w2", "b", 0, 2, 200),
		deliver("w1", "a", 1, 1000, 500),
		deliver("w1", "a", 1, 2000, 200),
		deliver("w1", "a", 2, 3000, 200),
	}
	// w1 answers a0, is killed before recording it, and w2 runs a0 again.
	rerun := []Delivery{
		deliver("w1", "a", 0, 0, 200),
		deliver("w2", "a", 0, 5000, 200),
		deliver("w2", "a", 1, 5100, 200),
		deliver("w2", "a", 2, 5200, 200),
		deliver("w2", "b", 0, 2, 200),
	}
	tests := []struct {
		name       string
		completed  []Key
		deliveries []Delivery
		faults     []Fault
		want       [5]int // lost, duplicates, unattributed, order violations, overlaps
		failed     bool
	}{{
		name:       "clean",
		completed:  enqueued,
		deliveries: clean,
	}, {
		name:       "a task never answered 2xx is lost",
		completed:  enqueued,
		deliveries: clean[:4],
		want:       [5]int{1, 0, 0, 0, 0},
		failed:     true,
	}, {
		name:       "a task without a completion row is lost",
		completed:  enqueued[1:],
		deliveries: clean,
		want:       [5]int{1, 0, 0, 0, 0},
		failed:     true,
	}, {
		name:       "a duplicate after a kill of the node that answered first is attributed",
		completed:  enqueued,
		deliveries: rerun,
		faults:     []Fault{{Kind: FaultKill, Node: "w1", Start: at(10), End: at(1000)}},
		want:       [5]int{0, 1, 0, 0, 0},
	}, {
		name:       "a duplicate after a freeze of the node that answered first is attributed",
		completed:  enqueued,
		deliveries: rerun,
		faults:     []Fault{{Kind: FaultFreeze, Node: "w1", Start: at(3), End: at(8000)}},
		want:       [5]int{0, 1, 0, 0, 0},
	}, {
		name:       "a duplicate across a database restart is attributed",
		completed:  enqueued,
		deliveries: rerun,
		faults:     []Fault{{Kind: FaultPGRestart, Start: at(2000), End: at(3000)}},
		want:       [5]int{0, 1, 0, 0, 0},
	}, {
		name:       "a duplicate within a lease TTL after a database restart is attributed",
		completed:  enqueued,
		deliveries: rerun,
		faults:     []Fault{{Kind: FaultPGRestart, Start: at(-4000), End: at(-1000)}},
		want:       [5]int{0, 1, 0, 0, 0},
	}, {
		name:       "a duplicate more than a lease TTL after a database restart is unattributed",
		completed:  enqueued,
		deliveries: rerun,
		faults:     []Fault{{Kind: FaultPGRestart, Start: at(-9000), End: at(-5000)}},
		want:       [5]int{0, 1, 1, 0, 0},
		failed:     true,
	}, {
		name:       "a duplicate across a stall of the whole machine is attributed",
		completed:  enqueued,
		deliveries: rerun,
		faults:     []Fault{{Kind: FaultStall, Start: at(1000), End: at(3000)}},
		want:       [5]int{0, 1, 0, 0, 0},
	}, {
		name:      "a duplicate with no fault is unattributed",
		completed: enqueued,
		deliveries: append(rerun[:len(rerun):len(rerun)],
			deliver("w3", "b", 0, 9000, 200)),
		faults: []Fault{
			{Kind: FaultKill, Node: "w1", Start: at(10), End: at(1000)}, // explains a0, not b0
			{Kind: FaultKill, Node: "w3", Start: at(100), End: at(200)}, // another node
			{Kind: FaultReceiver500, Start: at(100), End: at(9500)},     // never explains a duplicate
		},
		want:   [5]int{0, 2, 1, 0, 0},
		failed: true,
	}, {
		name:       "a fault of the right node outside the span does not attribute",
		completed:  enqueued,
		deliveries: rerun,
		faults:     []Fault{{Kind: FaultKill, Node: "w1", Start: at(6000), End: at(7000)}},
		want:       [5]int{0, 1, 1, 0, 0},
		failed:     true,
	}, {
		name:      "an earlier task run after a later one answered 2xx breaks the order",
		completed: enqueued,
		deliveries: []Delivery{
			deliver("w1", "a", 0, 0, 200),
			deliver("w1", "a", 2, 1000, 200),
			deliver("w1", "a", 1, 2000, 200),
			deliver("w2", "b", 0, 2, 200),
		},
		want:   [5]int{0, 0, 0, 1, 0},
		failed: true,
	}, {
		name:      "a later task that failed does not order the ones before it",
		completed: enqueued,
		deliveries: []Delivery{
			deliver("w1", "a", 0, 0, 200),
			deliver("w1", "a", 2, 1000, 500),
			deliver("w1", "a", 1, 2000, 200),
			deliver("w1", "a", 2, 3000, 200),
			deliver("w2", "b", 0, 2, 200),
		},
	}, {
		name:      "two deliveries of one ordering_id at once overlap",
		completed: enqueued,
		deliveries: []Delivery{
			deliver("w1", "a", 0, 0, 200),
			deliver("w2", "a", 1, 3, 200), // starts before a0 ends at 5
			deliver("w1", "a", 2, 1000, 200),
			deliver("w2", "b", 0, 2, 200), // another ordering_id: no overlap
		},
		want:   [5]int{0, 0, 0, 0, 1},
		failed: true,
	}, {
		// The shape of a node thawed past its lease delivering a task it
		// had claimed ahead, which its backup already ran with the next.
		name:      "a stale node's late delivery is an unattributed duplicate and an order violation",
		completed: enqueued,
		deliveries: []Delivery{
			deliver("w1", "a", 0, 0, 200),
			deliver("w2", "a", 1, 9000, 200),
			deliver("w2", "a", 2, 9100, 200),
			deliver("w1", "a", 1, 12000, 200),
			deliver("w2", "b", 0, 2, 200),
		},
		faults: []Fault{{Kind: FaultFreeze, Node: "w1", Start: at(100), End: at(11900)}},
		want:   [5]int{0, 1, 1, 1, 0},
		failed: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := Check(Input{Enqueued: enqueued, Completed: tt.completed, Deliveries: tt.deliveries, Faults: tt.faults, LeaseTTL: 4 * time.Second})
			got := [5]int{len(r.Lost), len(r.Duplicates), len(r.Unattributed()), len(r.OrderViolations), len(r.Overlaps)}
			if got != tt.want {
				t.Errorf("lost, duplicates, unattributed, order violations, overlaps = %v, want %v", got, tt.want)
			}
			if r.Failed() != tt.failed {
				t.Errorf("Failed() = %t, want %t", r.Failed(), tt.failed)
			}
			if len(r.Unknown) > 0 {
				t.Errorf("unknown keys: %v", r.Unknown)
			}
			var buf bytes.Buffer
			r.Print(&buf, time.Minute, 20)
			if tt.failed && !strings.Contains(buf.String(), "-- ") {
				t.Errorf("a failed report lists no violation:\n%s", buf.String())
			}
		})
	}
}

func TestCheckAttributesToTheFault(t *testing.T) {
	t.Parallel()
	kill := Fault{Kind: FaultKill, Node: "w1", Start: at(10), End: at(1000)}
	r := Check(Input{
		Enqueued:   []Key{task("a", 0)},
		Completed:  []Key{task("a", 0)},
		Deliveries: []Delivery{deliver("w1", "a", 0, 0, 200), deliver("w2", "a", 0, 5000, 200)},
		Faults:     []Fault{{Kind: FaultFreeze, Node: "w2", Start: at(0), End: at(9000)}, kill},
	})
	if len(r.Duplicates) != 1 || r.Duplicates[0].Cause == nil || *r.Duplicates[0].Cause != kill {
		t.Fatalf("duplicates = %+v, want one caused by %v", r.Duplicates, kill)
	}
	if r.Delivered != 1 || r.DuplicateKeys != 1 {
		t.Errorf("delivered %d, duplicate keys %d, want 1 and 1", r.Delivered, r.DuplicateKeys)
	}
}

func TestCheckUnknownDelivery(t *testing.T) {
	t.Parallel()
	r := Check(Input{
		Enqueued:   []Key{task("a", 0)},
		Completed:  []Key{task("a", 0)},
		Deliveries: []Delivery{deliver("w1", "a", 0, 0, 200), deliver("w1", "z", 0, 10, 200)},
	})
	if len(r.Unknown) != 1 || !r.Failed() {
		t.Fatalf("unknown = %v, failed %t; want the delivery of z reported and the run failed", r.Unknown, r.Failed())
	}
}

// TestOverLimit: a delivery that begins while the limit's number are in
// flight at the receiver is over the limit; one that begins as another
// ends is not.
func TestOverLimit(t *testing.T) {
	at := func(ms int) time.Time {
		return time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond)
	}
	d := func(id string, from, to int) Delivery { return Delivery{OrderingID: id, Start: at(from), End: at(to)} }
	ds := []Delivery{d("a", 0, 10), d("b", 5, 15), d("c", 10, 20), d("d", 12, 14), d("e", 30, 40)}
	if got := overLimit(ds, 2); len(got) != 1 || got[0].OrderingID != "d" {
		t.Errorf("limit 2: over = %+v, want d alone (b and c in flight when it began)", got)
	}
	if got := overLimit(ds, 3); len(got) != 0 {
		t.Errorf("limit 3: over = %+v, want none", got)
	}
	if got := overLimit(ds, 0); got != nil {
		t.Errorf("no limit: over = %+v", got)
	}
}
