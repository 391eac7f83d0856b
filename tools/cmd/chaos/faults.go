package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/pgsched/pgsched/internal/localpg"
)

// step is one planned fault, at an offset from the window's start.
type step struct {
	at   time.Duration
	kind string
	// dur is how long a freeze, outage or receiver-500 spell lasts, and
	// how long a killed node stays dead.
	dur time.Duration
}

// planConfig shapes the fault plan.
type planConfig struct {
	window    time.Duration // faults happen within it
	mode      string        // "faults", "outage" or "failover"
	ttl       time.Duration
	killEvery [2]time.Duration // a kill every so often, uniformly random in this range
	freezes   int
	outage    time.Duration
	fail500   time.Duration
}

// freezeLead is how long before a tick of dueGrid a freeze starts: after
// the nodes have claimed the tick's tasks (ClaimAhead, 25 ms by default)
// and before they start them.
const freezeLead = 8 * time.Millisecond

// plan lays the faults out over the window, reproducibly for a seed. Kills
// recur; freezes spread evenly, each timed freezeLead before a due tick;
// the database fault sits in the middle, the receiver's 500 spell at two
// thirds. Everything ends a few seconds before the window does, so the
// run's tail shows recovery.
//
// A failover gets a quiet span of failoverGap(ttl) of its own: the kills
// and freezes are laid out over the rest of the window, those that would
// reach into the span (their effects last up to two TTLs past their end)
// moved past it, so how long the workers take to come back measures the
// failover alone.
func plan(rng *rand.Rand, pc planConfig) []step {
	margin := 5 * time.Second
	var gap time.Duration
	if pc.mode == "failover" {
		gap = failoverGap(pc.ttl)
	}
	last := pc.window - gap - margin
	jitter := func(d time.Duration) time.Duration { return time.Duration(rng.Int64N(int64(d) + 1)) }
	var steps []step
	for at := pc.killEvery[0] + jitter(pc.killEvery[1]-pc.killEvery[0]); at < last; at += pc.killEvery[0] + jitter(pc.killEvery[1]-pc.killEvery[0]) {
		steps = append(steps, step{at: at, kind: FaultKill, dur: 500*time.Millisecond + jitter(1500*time.Millisecond)})
	}
	freeze := 2 * pc.ttl
	for i := range pc.freezes {
		slot := max(0, last-freeze) / time.Duration(pc.freezes)
		at := (time.Duration(i)*slot + slot/4 + jitter(slot/2)).Truncate(dueGrid) + dueGrid - freezeLead
		steps = append(steps, step{at: at, kind: FaultFreeze, dur: freeze})
	}
	switch pc.mode {
	case "outage":
		steps = append(steps, step{at: max(0, (last-pc.outage)/2), kind: FaultPGOutage, dur: pc.outage})
	case "failover":
		split := last / 2
		resume := split + gap // the quiet span ends
		for i := range steps {
			switch s := &steps[i]; {
			case s.at >= split:
				s.at += gap
			case s.at+s.dur+2*pc.ttl > split: // it would reach into the span
				s.at = resume
				if s.kind == FaultFreeze {
					s.at = resume.Truncate(dueGrid) + dueGrid - freezeLead
				}
			}
		}
		steps = append(steps, step{at: split + failoverLead, kind: FaultPGFailover})
		last += gap
	default:
		steps = append(steps, step{at: last / 2, kind: FaultPGRestart})
	}
	steps = append(steps, step{at: last * 2 / 3, kind: FaultReceiver500, dur: pc.fail500})
	slices.SortStableFunc(steps, func(a, b step) int { return cmp.Compare(a.at, b.at) })
	return steps
}

// failoverLead is how long after the last node fault's effects a failover
// comes.
const failoverLead = 2 * time.Second

// failoverGap is the span a failover keeps free of kills and freezes: its
// lead, then a lease TTL and failoverReadyWithin for the workers to come
// back, on dueGrid so the freezes moved past it stay timed to its ticks.
func failoverGap(ttl time.Duration) time.Duration {
	return (failoverLead + ttl + failoverReadyWithin + dueGrid - 1).Truncate(dueGrid)
}

// injector carries out a plan and records what it did.
type injector struct {
	cluster *cluster
	pg      *localpg.Server // nil: the database is not ours to restart
	// standby is pg's synchronous standby (-mode failover), db the run's
	// database, where the failover's recovery is watched.
	standby *localpg.Server
	db      *database
	recv    *receiver
	rng     *rand.Rand
	logger  *slog.Logger
	// ttl is the workers' lease TTL: a node killed or frozen is left alone
	// for one (after a kill) or two (after a freeze) more, so what it does
	// when it comes back is seen rather than cut short by the next fault.
	ttl time.Duration
	t0  time.Time // the window's start, on dueGrid

	mu     sync.Mutex
	faults []Fault
	busy   map[*node]bool // killed or frozen right now
	// back is how long after the promotion each node was ready again on
	// the new primary (-mode failover); a node missing was not within
	// failoverWatch.
	back map[string]time.Duration
}

// failoverReadyWithin is what the run allows beyond a lease TTL for every
// worker to be ready on a promoted standby: the TTL is the wait for the
// old primary's leases, the rest reconnecting and registering.
const failoverReadyWithin = 10 * time.Second

func (in *injector) record(f Fault) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.faults = append(in.faults, f)
}

func (in *injector) recorded() []Fault {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := slices.Clone(in.faults)
	slices.SortStableFunc(out, func(a, b Fault) int { return a.Start.Compare(b.Start) })
	return out
}

// run executes steps relative to t0, each in its own goroutine so a freeze
// or an outage does not hold up the kills, and returns when all are done.
func (in *injector) run(ctx context.Context, t0 time.Time, steps []step) {
	in.t0 = t0
	var wg sync.WaitGroup
	for _, s := range steps {
		if !sleep(ctx, time.Until(t0.Add(s.at))) {
			break
		}
		wg.Go(func() {
			if err := in.do(ctx, s); err != nil && ctx.Err() == nil {
				in.logger.Error("fault failed", "kind", s.kind, "error", err)
			}
		})
	}
	wg.Wait()
}

func (in *injector) do(ctx context.Context, s step) error {
	switch s.kind {
	case FaultKill:
		nd := in.pick()
		if nd == nil {
			in.logger.Warn("fault skipped: every node is down, frozen or just back", "kind", s.kind)
			return nil
		}
		defer in.releaseAfter(nd, in.ttl)
		f := Fault{Kind: FaultKill, Node: nd.id, Start: time.Now()}
		in.logger.Info("fault: SIGKILL", "node", nd.id, "restart_in", s.dur)
		if err := in.cluster.kill(nd); err != nil {
			return err
		}
		sleep(ctx, s.dur)
		err := in.cluster.start(nd)
		f.End = time.Now()
		in.record(f)
		return err

	case FaultFreeze:
		// A freeze waits for a node rather than be skipped: each one is a
		// chance to catch a node that comes back past its lease.
		var nd *node
		for nd = in.pick(); nd == nil; nd = in.pick() {
			if !sleep(ctx, 100*time.Millisecond) || !sleep(ctx, in.untilTick()) {
				return nil
			}
		}
		defer in.releaseAfter(nd, 2*in.ttl)
		f := Fault{Kind: FaultFreeze, Node: nd.id, Start: time.Now()}
		if err := in.cluster.freeze(nd); err != nil {
			return err
		}
		in.logger.Info("fault: SIGSTOP", "node", nd.id, "for", s.dur)
		// Thawed even when the run is interrupted: stopAll sends SIGTERM,
		// which a stopped process would not act on.
		sleep(ctx, s.dur)
		err := in.cluster.thaw(nd)
		f.End = time.Now()
		in.record(f)
		in.logger.Info("fault: SIGCONT", "node", nd.id)
		return err

	case FaultPGRestart, FaultPGOutage:
		if in.pg == nil {
			in.logger.Warn("fault skipped: DATABASE_URL is set, so the database is not ours to restart", "kind", s.kind)
			return nil
		}
		f := Fault{Kind: s.kind, Start: time.Now()}
		defer func() { f.End = time.Now(); in.record(f) }()
		// The server must come back even if the run is interrupted.
		bg := context.WithoutCancel(ctx)
		if s.kind == FaultPGRestart {
			in.logger.Info("fault: pg_ctl restart -m immediate")
			if err := in.pg.Restart(bg, localpg.Immediate); err != nil {
				return fmt.Errorf("restarting PostgreSQL: %w", err)
			}
			in.logger.Info("fault: PostgreSQL back")
			return nil
		}
		in.logger.Info("fault: PostgreSQL down (pg_ctl stop -m immediate)", "for", s.dur)
		if err := in.pg.Halt(bg, localpg.Immediate); err != nil {
			return fmt.Errorf("stopping PostgreSQL: %w", err)
		}
		sleep(ctx, s.dur)
		if err := in.pg.Resume(bg); err != nil {
			return fmt.Errorf("starting PostgreSQL again: %w", err)
		}
		in.logger.Info("fault: PostgreSQL back")
		return nil

	case FaultPGFailover:
		if in.pg == nil || in.standby == nil {
			return errors.New("-mode failover needs its own primary and standby")
		}
		f := Fault{Kind: s.kind, Start: time.Now()}
		bg := context.WithoutCancel(ctx)
		in.logger.Info("fault: primary killed (pg_ctl stop -m immediate), standby promoted")
		if err := in.pg.Halt(bg, localpg.Immediate); err != nil {
			return fmt.Errorf("killing the primary: %w", err)
		}
		if err := in.standby.Promote(bg); err != nil {
			return fmt.Errorf("promoting the standby: %w", err)
		}
		f.End = time.Now()
		in.record(f)
		in.logger.Info("fault: standby promoted; watching the workers come back")
		in.watchBack(ctx, f.End)
		return nil

	case FaultReceiver500:
		f := Fault{Kind: FaultReceiver500, Start: time.Now()}
		in.logger.Info("fault: receiver answers 500", "for", s.dur)
		in.recv.failFor(ctx, s.dur)
		f.End = time.Now()
		in.record(f)
		in.logger.Info("fault: receiver answers 200 again")
		return nil
	}
	return fmt.Errorf("unknown fault %q", s.kind)
}

// watchBack records, for each node, how long after promoted it held a live
// lease registered on the new primary and answered /readyz with 200,
// giving up after a TTL plus failoverReadyWithin plus a margin.
func (in *injector) watchBack(ctx context.Context, promoted time.Time) {
	deadline := promoted.Add(in.ttl + failoverReadyWithin + 20*time.Second)
	back := map[string]time.Duration{}
	for len(back) < len(in.cluster.nodes) && time.Now().Before(deadline) {
		live, err := in.db.onNewPrimary(ctx)
		if err == nil {
			for _, nd := range in.cluster.nodes {
				if _, ok := back[nd.id]; !ok && live[nd.id] && nd.ready(ctx) {
					back[nd.id] = time.Since(promoted)
					in.logger.Info("worker ready on the new primary", "node", nd.id, "after", back[nd.id].Round(time.Millisecond))
				}
			}
		}
		if !sleep(ctx, 100*time.Millisecond) {
			break
		}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.back = back
}

// failoverBack returns what watchBack recorded (nil without a failover).
func (in *injector) failoverBack() map[string]time.Duration {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.back
}

// untilTick returns how long until freezeLead before the next tick of
// dueGrid.
func (in *injector) untilTick() time.Duration {
	since := time.Since(in.t0) + freezeLead
	return since.Truncate(dueGrid) + dueGrid - since
}

// pick returns a random node that is neither down, frozen nor just back
// and marks it busy until releaseAfter, or returns nil.
func (in *injector) pick() *node {
	in.mu.Lock()
	defer in.mu.Unlock()
	var free []*node
	for _, nd := range in.cluster.nodes {
		if !in.busy[nd] {
			free = append(free, nd)
		}
	}
	if len(free) == 0 {
		return nil
	}
	nd := free[in.rng.IntN(len(free))]
	in.busy[nd] = true
	return nd
}

// releaseAfter makes nd available to pick again after d.
func (in *injector) releaseAfter(nd *node, d time.Duration) {
	time.AfterFunc(d, func() {
		in.mu.Lock()
		defer in.mu.Unlock()
		delete(in.busy, nd)
	})
}
