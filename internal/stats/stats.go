// Package stats keeps the history and counts the web console and psql
// users read (db/migrations/00009_console_stats.sql) cheap to write and
// cheap to read.
//
// A node counts its outcomes and its first attempts' start lateness in
// memory (a Recorder: a few atomic adds per task) and adds them to its
// row for the current minute once per maintenance round, so the history
// costs one upsert per node per round however many tasks run. The leader
// counts tasks per kind (a Counter) every few seconds, and less often
// when counting takes long, so pages read a few rows instead of every
// task.
package stats

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedtype"
)

// Recorder accumulates a node's outcomes until they are flushed. Its
// methods are safe for concurrent use.
type Recorder struct {
	completed, retried, dead, snoozed, started atomic.Int64
	// lateness sum and worst, in nanoseconds
	latenessSum, latenessMax atomic.Int64
	flushing                 sync.Mutex
}

// Outcome records one finished run: completed, retry, dead or snooze;
// other outcomes (released, handed back) are not counted.
func (r *Recorder) Outcome(outcome pgschedtype.Outcome) {
	switch outcome {
	case pgschedtype.OutcomeCompleted:
		r.completed.Add(1)
	case pgschedtype.OutcomeRetry:
		r.retried.Add(1)
	case pgschedtype.OutcomeDead:
		r.dead.Add(1)
	case pgschedtype.OutcomeSnooze:
		r.snoozed.Add(1)
	}
}

// Started records a first attempt starting late by lateness. The count
// and the lateness are added apart, so a flush between the two puts them
// in neighbouring minutes: a minute's mean is approximate, never lost.
func (r *Recorder) Started(lateness time.Duration) {
	lateness = max(lateness, 0)
	r.started.Add(1)
	r.latenessSum.Add(int64(lateness))
	raise(&r.latenessMax, int64(lateness))
}

// raise sets v to n if n is larger.
func raise(v *atomic.Int64, n int64) {
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}

func (r *Recorder) take() store.Stats {
	return store.Stats{
		Completed: r.completed.Swap(0), Retried: r.retried.Swap(0), Dead: r.dead.Swap(0), Snoozed: r.snoozed.Swap(0),
		Started:     r.started.Swap(0),
		LatenessSum: time.Duration(r.latenessSum.Swap(0)).Seconds(),
		LatenessMax: time.Duration(r.latenessMax.Swap(0)).Seconds(),
	}
}

func (r *Recorder) giveBack(s store.Stats) {
	r.completed.Add(s.Completed)
	r.retried.Add(s.Retried)
	r.dead.Add(s.Dead)
	r.snoozed.Add(s.Snoozed)
	r.started.Add(s.Started)
	r.latenessSum.Add(int64(s.LatenessSum * float64(time.Second)))
	raise(&r.latenessMax, int64(s.LatenessMax*float64(time.Second)))
}

// Flush adds what was recorded since the last flush to node's row for the
// current minute. On failure the counts are kept for the next flush (so a
// write that committed but whose answer was lost counts twice: the
// history may overstate, it never drops an outcome).
func (r *Recorder) Flush(ctx context.Context, st store.Store, db store.DBTX, node string) error {
	r.flushing.Lock()
	defer r.flushing.Unlock()
	s := r.take()
	if s.Zero() {
		return nil
	}
	if err := st.AddStats(ctx, db, node, s); err != nil {
		r.giveBack(s)
		return err
	}
	return nil
}

// Counter recounts tasks per kind while its node leads. It runs beside
// the leader's round, not in it: a count reads every task, and over tens
// of millions that takes longer than a lease, which the round must renew.
type Counter struct {
	Store store.Store
	DB    store.DBTX
	// Interval is the time between counts; a count that takes long
	// stretches it to Busy times its duration, so counting never takes
	// more than a small share of the database.
	Interval time.Duration
	Logger   *slog.Logger

	next  time.Time
	prune time.Time
	slow  bool
}

// Busy bounds counting to 1/Busy of the time.
const Busy = 20

// MaxCount bounds one count; one that takes longer is cancelled and the
// next waits Busy times as long.
const MaxCount = 10 * time.Minute

// Run counts whenever leading reports true and a count is due, until ctx
// ends. It looks once a second (or every Interval, if shorter). The first
// count comes an Interval after the node starts to lead, not at once: a
// new leader (a fresh start, a failover) starts while the nodes catch up
// with due work, which a read of every task would compete with, and the
// last leader's counts stay readable meanwhile.
func (c *Counter) Run(ctx context.Context, leading func() bool) {
	tick := time.NewTicker(min(c.Interval, time.Second))
	defer tick.Stop()
	led := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !leading() {
			led = false
			continue
		}
		if !led {
			led = true
			if first := time.Now().Add(c.Interval); first.After(c.next) {
				c.next = first
			}
		}
		if err := c.Round(ctx); err != nil && ctx.Err() == nil && c.Logger != nil {
			c.Logger.Warn("counting tasks per kind failed; trying again later", "error", err)
		}
	}
}

// Round counts if the last count is Interval (or Busy times its
// duration) old, and once a minute prunes history older than a day.
func (c *Counter) Round(ctx context.Context) error {
	now := time.Now()
	if now.After(c.prune) {
		if _, err := c.Store.PruneStats(ctx, c.DB); err != nil {
			return err
		}
		c.prune = now.Add(time.Minute)
	}
	if now.Before(c.next) {
		return nil
	}
	began := time.Now()
	cctx, cancel := context.WithTimeout(ctx, MaxCount)
	defer cancel()
	_, err := c.Store.CountKinds(cctx, c.DB)
	took := time.Since(began)
	c.next = began.Add(max(c.Interval, time.Duration(math.Min(float64(Busy)*float64(took), float64(time.Hour)))))
	if err != nil {
		return err
	}
	if slow := took*Busy > c.Interval; slow != c.slow && c.Logger != nil {
		if slow {
			c.Logger.Info("counting tasks per kind takes long; counting less often", "took", took, "next_in", time.Until(c.next).Round(time.Millisecond))
		} else {
			c.Logger.Info("counting tasks per kind is quick again", "took", took, "interval", c.Interval)
		}
		c.slow = slow
	}
	return nil
}
