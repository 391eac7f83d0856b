package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Key identifies a task the way pgsched does. At is scheduled_at in
// microseconds, the precision pgsched keeps, so a key read back from a
// webhook body equals the one enqueued.
type Key struct {
	OrderingID    string
	At            int64
	UniquenessKey string
}

func keyOf(orderingID string, scheduledAt time.Time, uniquenessKey string) Key {
	return Key{OrderingID: orderingID, At: scheduledAt.UnixMicro(), UniquenessKey: uniquenessKey}
}

// before orders two keys of one ordering_id as pgsched runs them: by
// scheduled_at, then (for the chaos run's zero-padded sequence numbers) by
// uniqueness_key.
func (k Key) before(o Key) bool {
	return cmp.Or(cmp.Compare(k.At, o.At), strings.Compare(k.UniquenessKey, o.UniquenessKey)) < 0
}

func (k Key) String() string {
	return fmt.Sprintf("%s@%s/%s", k.OrderingID, time.UnixMicro(k.At).UTC().Format("15:04:05.000000"), k.UniquenessKey)
}

// Delivery is one webhook request as the receiver saw it.
type Delivery struct {
	Node          string    `json:"node"`
	OrderingID    string    `json:"ordering_id"`
	ScheduledAt   time.Time `json:"scheduled_at"`
	UniquenessKey string    `json:"uniqueness_key"`
	Attempt       int       `json:"attempt"`
	Start         time.Time `json:"start"`
	End           time.Time `json:"end"`
	Status        int       `json:"status"`
	// Aborted: the worker closed the connection before the answer.
	Aborted bool `json:"aborted,omitempty"`
}

func (d Delivery) key() Key { return keyOf(d.OrderingID, d.ScheduledAt, d.UniquenessKey) }
func (d Delivery) ok() bool { return d.Status >= 200 && d.Status <= 299 }
func (d Delivery) String() string {
	s := fmt.Sprintf("%s by %s attempt %d, %s..%s, status %d",
		d.key(), d.Node, d.Attempt, clock(d.Start), clock(d.End), d.Status)
	if d.Aborted {
		s += " (worker hung up)"
	}
	return s
}

// Fault kinds. A kill, crash or freeze belongs to one node; the database
// faults and stalls to every node; receiver-500 causes retries, never
// duplicates. Crashes and stalls are observed, the others injected.
const (
	FaultKill      = "kill"
	FaultCrash     = "crash" // a worker exited without being told to
	FaultFreeze    = "freeze"
	FaultPGRestart = "pg-restart"
	FaultPGOutage  = "pg-outage"
	// FaultPGFailover: the primary killed (immediate) and its synchronous
	// standby promoted; the workers follow it by their multi-host
	// connection string.
	FaultPGFailover  = "pg-failover"
	FaultReceiver500 = "receiver-500"
	// FaultStall: the chaos process got no CPU for a while, and on a
	// machine that busy neither did the workers or PostgreSQL: every node
	// froze at once.
	FaultStall = "stall"
)

// Fault is one fault and the span it lasted: a kill until the node's
// restart, a freeze from SIGSTOP to SIGCONT, a database fault until the
// server accepted connections again, a stall from the last moment the chaos
// process ran to the next.
type Fault struct {
	Kind  string    `json:"kind"`
	Node  string    `json:"node,omitempty"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

func (f Fault) String() string {
	s := f.Kind
	if f.Node != "" {
		s += " " + f.Node
	}
	s = fmt.Sprintf("%s %s..%s", s, clock(f.Start), clock(f.End))
	if f.observed() {
		s += fmt.Sprintf(" (observed, %s)", f.End.Sub(f.Start).Round(time.Millisecond))
	}
	return s
}

func (f Fault) observed() bool { return f.Kind == FaultCrash || f.Kind == FaultStall }

// everyNode reports whether f hits every node at once, so that its effects
// last up to a lease TTL past its end (see Input.LeaseTTL).
func (f Fault) everyNode() bool {
	return f.Kind == FaultPGRestart || f.Kind == FaultPGOutage || f.Kind == FaultPGFailover || f.Kind == FaultStall
}

// explains reports whether f can make a task delivered with a 2xx by node
// run again: the node lost the outcome (killed, or frozen past its lease),
// or the database lost it or could not take it.
func (f Fault) explains(node string) bool {
	switch f.Kind {
	case FaultKill, FaultCrash, FaultFreeze:
		return f.Node == node
	}
	return f.everyNode()
}

// attributionSlack widens each fault backwards: a request written just
// before a SIGKILL or SIGSTOP reaches the receiver (which stamps its start)
// a moment after the fault was stamped.
const attributionSlack = 500 * time.Millisecond

// Input is everything the checker looks at.
type Input struct {
	Enqueued   []Key
	Completed  []Key // rows of <schema>.completions
	Deliveries []Delivery
	Faults     []Fault
	// LeaseTTL is the workers' lease TTL. The effects of a database fault
	// or a stall last that long past its end: a node that could not renew
	// during it loses its lease (and hangs up on its running deliveries)
	// when the lease runs out, up to one TTL after its last renewal.
	LeaseTTL time.Duration
	// Limit is the chaos kind's max_running (pgsched.set_limit), 0 for
	// none: the receiver must never serve more deliveries at once.
	Limit int
}

// Duplicate is a 2xx delivery of a key that already had one.
type Duplicate struct {
	Earlier, Later Delivery
	// Cause is the fault that explains it; nil fails the run.
	Cause *Fault
}

// OrderViolation is a delivery that started after a 2xx delivery of a later
// task of its ordering_id had started.
type OrderViolation struct {
	Delivery Delivery
	Later    Delivery // the later task's 2xx delivery that came first
}

// Overlap is two deliveries of one ordering_id running at the same time.
type Overlap struct {
	First, Second Delivery
}

// Lost is an enqueued key the run did not complete.
type Lost struct {
	Key          Key
	Answered2xx  bool
	InCompletion bool
}

// NodeCount is what one node delivered.
type NodeCount struct {
	Deliveries, OK, Failed, Aborted int
}

// Report is the checker's verdict.
type Report struct {
	Enqueued   int
	Deliveries int
	// Delivered is the number of distinct enqueued keys answered 2xx.
	Delivered int
	// Completed is the number of completion rows and DistinctCompleted the
	// keys among them.
	Completed, DistinctCompleted int
	Lost                         []Lost
	Duplicates                   []Duplicate
	DuplicateKeys                int
	OrderViolations              []OrderViolation
	Overlaps                     []Overlap
	// Limit and OverLimit: the deliveries that began while Limit others
	// were in flight at the receiver (with a limit set).
	Limit     int
	OverLimit []Delivery
	// Unknown are deliveries and completions of keys never enqueued.
	Unknown  []string
	ByNode   map[string]NodeCount
	Faults   []Fault
	Attempts map[int]int // 2xx deliveries by attempt number
}

// Unattributed returns the duplicates no fault explains.
func (r Report) Unattributed() []Duplicate {
	var out []Duplicate
	for _, d := range r.Duplicates {
		if d.Cause == nil {
			out = append(out, d)
		}
	}
	return out
}

// Failed reports whether any guarantee was broken.
func (r Report) Failed() bool {
	return len(r.Lost) > 0 || len(r.OrderViolations) > 0 || len(r.Overlaps) > 0 || len(r.OverLimit) > 0 ||
		len(r.Unattributed()) > 0 || len(r.Unknown) > 0
}

// Check compares what was enqueued with what the receiver saw and the
// database recorded.
func Check(in Input) Report {
	r := Report{
		Enqueued:   len(in.Enqueued),
		Deliveries: len(in.Deliveries),
		Completed:  len(in.Completed),
		ByNode:     map[string]NodeCount{},
		Limit:      in.Limit,
		OverLimit:  overLimit(in.Deliveries, in.Limit),
		Faults:     in.Faults,
		Attempts:   map[int]int{},
	}
	enqueued := make(map[Key]bool, len(in.Enqueued))
	for _, k := range in.Enqueued {
		enqueued[k] = true
	}
	completed := make(map[Key]bool, len(in.Completed))
	for _, k := range in.Completed {
		completed[k] = true
		if !enqueued[k] {
			r.Unknown = append(r.Unknown, "completion of "+k.String())
		}
	}
	r.DistinctCompleted = len(completed)

	// Deliveries in start order, per key and per ordering_id.
	ds := slices.Clone(in.Deliveries)
	slices.SortStableFunc(ds, func(a, b Delivery) int { return a.Start.Compare(b.Start) })
	oks := map[Key][]Delivery{}
	byID := map[string][]Delivery{}
	for _, d := range ds {
		nc := r.ByNode[d.Node]
		nc.Deliveries++
		switch {
		case d.ok():
			nc.OK++
		default:
			nc.Failed++
		}
		if d.Aborted {
			nc.Aborted++
		}
		r.ByNode[d.Node] = nc
		if !enqueued[d.key()] {
			r.Unknown = append(r.Unknown, "delivery of "+d.String())
			continue
		}
		if d.ok() {
			oks[d.key()] = append(oks[d.key()], d)
			r.Attempts[d.Attempt]++
		}
		byID[d.OrderingID] = append(byID[d.OrderingID], d)
	}

	for _, k := range in.Enqueued {
		if len(oks[k]) > 0 {
			r.Delivered++
		}
		if len(oks[k]) == 0 || !completed[k] {
			r.Lost = append(r.Lost, Lost{Key: k, Answered2xx: len(oks[k]) > 0, InCompletion: completed[k]})
		}
	}

	for _, k := range slices.SortedFunc(maps.Keys(oks), func(a, b Key) int {
		return cmp.Or(strings.Compare(a.OrderingID, b.OrderingID), cmp.Compare(a.At, b.At), strings.Compare(a.UniquenessKey, b.UniquenessKey))
	}) {
		list := oks[k]
		if len(list) < 2 {
			continue
		}
		r.DuplicateKeys++
		for i := 1; i < len(list); i++ {
			r.Duplicates = append(r.Duplicates, Duplicate{
				Earlier: list[i-1], Later: list[i], Cause: cause(in.Faults, in.LeaseTTL, list[i-1], list[i]),
			})
		}
	}

	for _, id := range slices.Sorted(maps.Keys(byID)) {
		list := byID[id]
		// Order: the latest task (by key) among the 2xx deliveries started
		// so far; a delivery of an earlier task after it breaks the order.
		var latest *Delivery
		// Overlap: the delivery ending last among those started so far.
		var lastEnd *Delivery
		for i := range list {
			d := &list[i]
			if latest != nil && latest.Start.Before(d.Start) && d.key().before(latest.key()) {
				r.OrderViolations = append(r.OrderViolations, OrderViolation{Delivery: *d, Later: *latest})
			}
			if lastEnd != nil && d.Start.Before(lastEnd.End) {
				r.Overlaps = append(r.Overlaps, Overlap{First: *lastEnd, Second: *d})
			}
			if d.ok() && (latest == nil || latest.key().before(d.key())) {
				latest = d
			}
			if lastEnd == nil || d.End.After(lastEnd.End) {
				lastEnd = d
			}
		}
	}
	return r
}

// cause returns the first fault that explains why later repeated earlier: it
// concerns earlier's node (or the database) and overlaps the span from
// earlier's start to later's.
func cause(faults []Fault, leaseTTL time.Duration, earlier, later Delivery) *Fault {
	for i, f := range faults {
		if !f.explains(earlier.Node) {
			continue
		}
		end := f.End
		if end.IsZero() {
			end = f.Start
		}
		if f.everyNode() {
			end = end.Add(leaseTTL)
		}
		if !f.Start.Add(-attributionSlack).After(later.Start) && !end.Before(earlier.Start) {
			return &faults[i]
		}
	}
	return nil
}

// Print writes the report, listing up to max items of each violation.
func (r Report) Print(w io.Writer, runTime time.Duration, max int) {
	unattributed := r.Unattributed()
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("== pgsched chaos report")
	p("enqueued:          %d", r.Enqueued)
	p("deliveries:        %d (every request the receiver answered)", r.Deliveries)
	p("delivered:         %d distinct keys answered 2xx", r.Delivered)
	p("completions:       %d rows, %d distinct keys", r.Completed, r.DistinctCompleted)
	p("lost:              %d", len(r.Lost))
	stalled := 0
	for _, d := range r.Duplicates {
		if d.Cause != nil && d.Cause.Kind == FaultStall {
			stalled++
		}
	}
	p("duplicates:        %d keys answered 2xx more than once, %d extra deliveries: %d attributed to a fault (%d to a stall), %d unattributed",
		r.DuplicateKeys, len(r.Duplicates), len(r.Duplicates)-len(unattributed), stalled, len(unattributed))
	p("order violations:  %d", len(r.OrderViolations))
	p("overlaps:          %d", len(r.Overlaps))
	if r.Limit > 0 {
		p("over the limit:    %d deliveries began while %d were in flight", len(r.OverLimit), r.Limit)
	}
	if len(r.Unknown) > 0 {
		p("unknown keys:      %d (deliveries or completions of keys never enqueued)", len(r.Unknown))
	}
	p("run time:          %s", runTime.Round(time.Second))

	p("-- deliveries by node (requests, 2xx, non-2xx, worker hung up)")
	for _, n := range slices.Sorted(maps.Keys(r.ByNode)) {
		c := r.ByNode[n]
		p("  %-6s %7d %7d %6d %5d", n, c.Deliveries, c.OK, c.Failed, c.Aborted)
	}
	p("-- 2xx deliveries by attempt")
	for _, a := range slices.Sorted(maps.Keys(r.Attempts)) {
		p("  attempt %-3d %d", a, r.Attempts[a])
	}
	counts := map[string]int{}
	var injected int
	for _, f := range r.Faults {
		counts[f.Kind]++
		if !f.observed() {
			injected++
		}
	}
	p("-- faults: %d injected, %d observed (crashes, stalls of this process)", injected, len(r.Faults)-injected)
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		p("  %-13s %d", k, counts[k])
	}
	for _, f := range r.Faults {
		p("  %s", f)
	}

	section := func(title string, n int, item func(i int) string) {
		if n == 0 {
			return
		}
		p("-- %s: %d (first %d)", title, n, min(n, max))
		for i := range min(n, max) {
			p("  %s", item(i))
		}
	}
	section("LOST", len(r.Lost), func(i int) string {
		l := r.Lost[i]
		return fmt.Sprintf("%s: answered 2xx %t, in completions %t", l.Key, l.Answered2xx, l.InCompletion)
	})
	section("UNATTRIBUTED DUPLICATES", len(unattributed), func(i int) string {
		d := unattributed[i]
		return fmt.Sprintf("%s\n    first: %s\n    again: %s", d.Earlier.key(), d.Earlier, d.Later)
	})
	var attributed []Duplicate
	for _, d := range r.Duplicates {
		if d.Cause != nil {
			attributed = append(attributed, d)
		}
	}
	section("attributed duplicates", len(attributed), func(i int) string {
		d := attributed[i]
		return fmt.Sprintf("%s: first by %s at %s, again by %s at %s; cause %s",
			d.Earlier.key(), d.Earlier.Node, clock(d.Earlier.Start), d.Later.Node, clock(d.Later.Start), d.Cause)
	})
	section("ORDER VIOLATIONS", len(r.OrderViolations), func(i int) string {
		v := r.OrderViolations[i]
		return fmt.Sprintf("%s\n    ran:   %s\n    after: %s", v.Delivery.OrderingID, v.Delivery, v.Later)
	})
	section("OVERLAPS", len(r.Overlaps), func(i int) string {
		o := r.Overlaps[i]
		return fmt.Sprintf("%s\n    %s\n    %s", o.First.OrderingID, o.First, o.Second)
	})
	section("UNKNOWN", len(r.Unknown), func(i int) string { return r.Unknown[i] })
}

func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format("15:04:05.000")
}

// overLimit returns the deliveries that began while limit others were in
// flight, by the receiver's clock (a delivery is in flight from its Start
// to its End).
func overLimit(ds []Delivery, limit int) []Delivery {
	if limit <= 0 {
		return nil
	}
	byStart := slices.Clone(ds)
	slices.SortFunc(byStart, func(a, b Delivery) int { return a.Start.Compare(b.Start) })
	var ends []time.Time // ends of the deliveries in flight, soonest first
	var over []Delivery
	for _, d := range byStart {
		for len(ends) > 0 && !ends[0].After(d.Start) {
			ends = ends[1:]
		}
		if len(ends) >= limit {
			over = append(over, d)
		}
		i, _ := slices.BinarySearchFunc(ends, d.End, func(e, t time.Time) int { return e.Compare(t) })
		ends = slices.Insert(ends, i, d.End)
	}
	return over
}
