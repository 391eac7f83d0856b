package dispatch

import (
	"context"
	"slices"
	"time"

	"github.com/pgsched/pgsched/internal/lease"
	"github.com/pgsched/pgsched/internal/store"
)

// claimer knows which of the node's partitions have due work and claims
// from them. The due partitions are read again only when work may have
// become due since the last read: outcomes written, a NOTIFY, a new term
// or set of partitions, a claim error (all set stale or invalidate), a
// claim that took the last due tasks (the partitions may hold more, due
// later), or the time recheckAt (the next not-yet-due task, at the latest
// one poll interval on). A handler returning frees capacity, not due work:
// re-reading on every return probed every served partition per wake-up,
// mostly to find nothing.
type claimer struct {
	d         *Dispatcher
	due       []store.DuePartition // partitions believed due, most overdue first
	parts     []int32              // the served partitions due was read for
	stale     bool                 // work may have become due since the read
	recheckAt time.Time
}

// invalidate forgets the due partitions: the next claim reads them again.
func (c *claimer) invalidate() { c.due, c.stale = nil, true }

// wait is how long the loop may sleep before the claimer must look again.
func (c *claimer) wait() time.Duration { return max(time.Until(c.recheckAt), time.Millisecond) }

// claim takes up to free due tasks for term from the node's partitions,
// reading which are due first when it must. claimed says a claim statement
// ran and succeeded; err, that reading or claiming failed (logged here;
// the caller backs off). A failed claim split over Citus workers may
// still return the tasks its committed calls claimed: the caller runs
// them all the same.
func (c *claimer) claim(ctx context.Context, term *lease.Term, free int) (jobs []store.Claimed, received time.Time, claimed bool, err error) {
	d := c.d
	// The cache is only good for the partitions it was read for
	// (hand-overs change them) and until recheckAt.
	parts := d.cfg.Partitions()
	now := time.Now()
	if !slices.Equal(parts, c.parts) || !now.Before(c.recheckAt) {
		c.invalidate()
	}
	if len(c.due) == 0 && c.stale {
		c.stale = false
		c.parts, c.recheckAt = parts, now.Add(d.cfg.PollInterval)
		next, err := d.cfg.Store.NextDue(ctx, d.cfg.DB, parts)
		if err != nil {
			if ctx.Err() == nil {
				d.cfg.Logger.Warn("reading due partitions failed", "error", err)
			}
			c.stale = true
			return nil, time.Time{}, false, err
		}
		for _, p := range next {
			if p.DueIn > d.cfg.ClaimAhead+time.Millisecond {
				if at := now.Add(p.DueIn - d.cfg.ClaimAhead); at.Before(c.recheckAt) {
					c.recheckAt = at
				}
				break
			}
			c.due = append(c.due, p)
		}
	}
	if len(c.due) == 0 {
		return nil, time.Time{}, false, nil
	}
	claimFrom := make([]int32, len(c.due))
	for i, p := range c.due {
		claimFrom[i] = int32(p.Partition)
	}
	// One claim spans every due partition, most overdue first: one commit
	// (one WAL flush) whatever the spread of the work. Never cancel it
	// half-way: the server may commit it while the client gives up,
	// leaving tasks claimed that nobody runs.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statementTimeout)
	var end func(int, error)
	if tr := d.cfg.Tracer; tr != nil {
		end = tr.StartBatch(cctx, "claim")
	}
	var unreached []int32
	// The node's other partitions are looked in for tasks of a priority
	// other than 0 (when any is in use): one enqueued since the due
	// partitions were read is claimed before the lower ones known.
	jobs, unreached, err = d.cfg.Store.ClaimFrom(cctx, d.cfg.DB, d.cfg.Node.ID(), term.Epoch, claimFrom, parts, free, d.cfg.ClaimAhead)
	received = time.Now()
	cancel()
	if end != nil {
		end(len(jobs), err)
	}
	if err != nil {
		// It may have committed all the same (see reconcile).
		d.statementFailed()
		if ctx.Err() == nil {
			d.cfg.Logger.Warn("claiming failed", "partitions", len(claimFrom), "error", err)
		}
		c.invalidate()
		return jobs, received, false, err
	}
	if len(jobs) < free {
		// Every partition ran dry (or is locked by others): read again
		// once work may have become due. A claim that took tasks took
		// what was due within ClaimAhead, and those partitions may hold
		// tasks due a little later, which the last read did not see (it
		// gives each partition's earliest only): read again ClaimAhead
		// from now, so the wait is timed by what comes due next, not by
		// the poll interval. Not sooner: what that read would find due
		// before then, this claim took; and while outcomes keep coming,
		// the reads they prompt (invalidate) come first. A claim that
		// took nothing changed nothing: no read.
		c.due = nil
		if len(jobs) > 0 {
			c.recheckAt = time.Now().Add(d.cfg.ClaimAhead)
		}
	} else if last := jobs[len(jobs)-1]; last.Priority <= 0 {
		// The claim moved on from a partition only once it ran dry (at
		// the last task's priority and every higher one; lower ones wait
		// for the due partitions' next read): start the next one at the
		// last that gave tasks. A claim that stopped at a priority above
		// 0 left the lower ones where they were: the list stays whole.
		// Partitions the claim did not reach (on Citus, those of workers
		// not called) stay, in their places.
		if len(unreached) == 0 {
			for len(c.due) > 1 && c.due[0].Partition != last.Partition {
				c.due = c.due[1:]
			}
		} else if i := slices.IndexFunc(c.due, func(p store.DuePartition) bool { return p.Partition == last.Partition }); i > 0 {
			kept := make([]store.DuePartition, 0, len(c.due))
			for _, p := range c.due[:i] {
				if slices.Contains(unreached, int32(p.Partition)) {
					kept = append(kept, p)
				}
			}
			c.due = append(kept, c.due[i:]...)
		}
	}
	return jobs, received, true, nil
}
