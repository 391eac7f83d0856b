package dispatch

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/pgschedtype"
)

// finisher writes outcomes in batches.
type finisher struct {
	cfg   Config
	after func()
	// handover and handedOver connect finishes to the dispatcher: which
	// successors a batch may start, and starting them.
	handover   func(epoch int64, finished int) store.Handover
	handedOver func(epoch int64, jobs []store.Claimed)
	// settled is told the jobs whose outcome a statement settled (written,
	// or fenced); failed, that a statement failed; writing is held shared
	// by each write (see Dispatcher.reconcile).
	settled func(jobs []*Job)
	failed  func()
	writing *sync.RWMutex
	// handedShare is the share of the last batch's outcomes that handed a
	// successor over, in percent: high when the finish statements carry
	// the claiming too, and then two run at once (see run).
	handedShare atomic.Int32
	// failingSince is when outcomes began failing to be written (unix
	// nanoseconds; 0: they are not); see unrecorded.
	failingSince atomic.Int64
	mu           sync.Mutex
	items        []finishItem
	// aside holds outcomes the database refused on their own; they are
	// tried again now and then (see run) without holding up the queue.
	aside []finishItem
	// inflight counts outcomes taken into a statement not yet back;
	// refusedOut, those of them or of items that were set aside before,
	// so a refused outcome being tried again still counts as failing.
	inflight, refusedOut int
	lastErr              error
	signal               chan struct{}
	closed               chan struct{}
	once                 sync.Once
}

type finishItem struct {
	job *Job
	res Result
	ran time.Duration
	// refused: the database refused this outcome on its own before.
	refused bool
}

// minSecond is the smallest batch worth a second finish statement while
// one is in flight.
const minSecond = 50

func (f *finisher) add(job *Job, res Result, ran time.Duration) {
	f.mu.Lock()
	f.items = append(f.items, finishItem{job: job, res: res, ran: ran})
	f.mu.Unlock()
	select {
	case f.signal <- struct{}{}:
	default:
	}
}

func (f *finisher) close() { f.once.Do(func() { close(f.closed) }) }

// requeueAside puts the outcomes set aside back at the front of the queue.
func (f *finisher) requeueAside() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refusedOut += len(f.aside)
	f.items = append(f.aside, f.items...)
	f.aside = nil
}

func (f *finisher) asideCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.aside)
}

func (f *finisher) pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.items)
}

// takeLane removes up to n outcomes of lane's partitions (0: even, 1:
// odd) from the queue, in their order, if it holds at least least of them.
func (f *finisher) takeLane(lane, n, least int) []finishItem {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := 0
	for _, it := range f.items {
		if int(it.job.Partition)%2 == lane {
			in++
		}
	}
	if in < max(least, 1) {
		return nil
	}
	batch := make([]finishItem, 0, min(in, n))
	kept := f.items[:0]
	for _, it := range f.items {
		if len(batch) < n && int(it.job.Partition)%2 == lane {
			batch = append(batch, it)
		} else {
			kept = append(kept, it)
		}
	}
	clear(f.items[len(kept):])
	f.items = kept
	f.inflight += len(batch)
	return batch
}

// take removes up to n outcomes from the front of the queue.
func (f *finisher) take(n int) []finishItem {
	f.mu.Lock()
	defer f.mu.Unlock()
	n = min(n, len(f.items))
	batch := append([]finishItem(nil), f.items[:n]...)
	f.items = f.items[n:]
	f.inflight += n
	return batch
}

// run writes queued outcomes until closed, then flushes them. Usually one
// statement at a time: outcomes that arrive meanwhile gather for the next.
// While most outcomes hand a successor over (handedShare), the finish
// statements do the node's claiming too and one at a time bounds the
// node, so two run at once, one for the outcomes of the even partitions
// and one for the odd (a lane each): a successor is in its predecessor's
// partition, so each lane's successors, once run, make up its next batch
// as soon as its statement is back, without waiting for the other, and
// the two statements touch the heads of different partitions (which took
// less CPU per task than halves of one queue, docs/benchmarks.md). Only
// while the node serves more than half of the partitions, though: where
// several nodes share the work, two statements each contend in the
// database (on the heads' relation extension and the WAL) for more than
// they gain (docs/benchmarks.md, the replicas workload). Only one outcome per
// ordering_id is ever queued or being written (its next task starts only
// after that write commits), so concurrent statements lock disjoint heads.
func (f *finisher) run() {
	type end struct {
		lane int // 0, 1, or -1 for a statement of every partition's outcomes
		err  error
	}
	ended := make(chan end, 2)
	writing := 0
	var busy [2]bool // a lane's statement runs
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	waiting := false // timer armed: a batch gathers, or a failed write's backoff runs
	backoff := 10 * time.Millisecond
	closing, closed := false, f.closed
	start := func(lane int, batch []finishItem) {
		writing++
		if lane >= 0 {
			busy[lane] = true
		}
		go func() { ended <- end{lane, f.writeBatch(batch)} }()
	}
	// Outcomes set aside go back to the front of the queue after a delay
	// that grows while the database keeps refusing them.
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	retryArmed := false
	retryDelay := 100 * time.Millisecond
	retriedAtClose := false
	for {
		now := false // write what is queued without gathering first
		select {
		case <-retry.C:
			retryArmed, now = false, true
			f.requeueAside()
		case <-f.signal:
		case e := <-ended:
			writing--
			if e.lane >= 0 {
				busy[e.lane] = false
			}
			if e.err == nil {
				backoff = 10 * time.Millisecond
				now = true // what queued during the write has gathered
				break
			}
			if closing && backoff >= 5*time.Second {
				f.cfg.Logger.Error("giving up recording outcomes at shutdown; the tasks will be rescued when the lease expires",
					"tasks", f.pending())
				for ; writing > 0; writing-- {
					<-ended
				}
				return
			}
			timer.Reset(backoff)
			waiting = true
			backoff = min(backoff*2, 5*time.Second)
		case <-timer.C:
			waiting, now = false, true
		case <-closed:
			closing, closed = true, nil
		}
		if aside := f.asideCount(); aside == 0 {
			retryDelay = 100 * time.Millisecond
		} else if !retryArmed && !closing {
			retry.Reset(retryDelay)
			retryArmed = true
			retryDelay = min(retryDelay*2, 5*time.Second)
		}
		pending := f.pending()
		if pending == 0 {
			if closing && writing == 0 {
				aside := f.asideCount()
				if aside == 0 {
					return
				}
				if retriedAtClose {
					f.cfg.Logger.Error("giving up recording outcomes the database refuses; the tasks go back to their queues when the node deregisters",
						"tasks", aside)
					return
				}
				retriedAtClose = true
				f.requeueAside()
				pending = f.pending()
			} else {
				continue
			}
		}
		limit := 1
		if f.handedShare.Load() >= 50 && 2*len(f.cfg.Partitions()) > f.cfg.PartitionCount {
			limit = 2
		}
		if waiting || writing >= limit {
			continue
		}
		if !now && !closing {
			// Let a batch gather.
			timer.Reset(f.cfg.FinishDelay)
			waiting = true
			continue
		}
		switch {
		case limit == 2 && (busy[0] || busy[1] || writing == 0 && pending >= 2*minSecond):
			least := minSecond
			if writing == 0 || closing {
				least = 1
			}
			for lane := range busy {
				if busy[lane] || writing >= limit {
					continue
				}
				if batch := f.takeLane(lane, f.cfg.FinishBatch, least); len(batch) > 0 {
					start(lane, batch)
				}
			}
		case writing == 0:
			// One statement: the lanes wait for it, so that two at once
			// never share a partition.
			start(-1, f.take(f.cfg.FinishBatch))
		}
	}
}

// writeBatch writes one batch. Outcomes a failed statement did not write
// go back to the front of the queue for the next try; outcomes the
// database refuses on their own are set aside (see writeGroup) and the
// batch counts as written, so they hold up nothing.
func (f *finisher) writeBatch(batch []finishItem) error {
	f.writing.RLock()
	unwritten, refused, claimable, err := f.write(batch)
	f.writing.RUnlock()
	if claimable > 0 || err != nil || len(refused) > 0 {
		// Work may be due: successors left for a claim, tasks given back
		// (or, after an error, who knows).
		f.after()
	}
	f.mu.Lock()
	f.inflight -= len(batch)
	f.refusedOut -= countRefused(batch)
	for i := range refused {
		refused[i].refused = true
	}
	f.aside = append(f.aside, refused...)
	if err != nil {
		f.refusedOut += countRefused(unwritten)
		f.items = append(unwritten, f.items...)
	}
	f.mu.Unlock()
	if err != nil {
		f.failed()
		f.noteFailure(err)
		f.cfg.Logger.Warn("recording task outcomes failed; will retry", "tasks", len(unwritten), "error", err)
		return err
	}
	f.noteWritten()
	return nil
}

// write writes a batch, one statement per node term among its outcomes
// (almost always one; see writeGroup), and returns the outcomes it could
// not write (those of the statement that failed and of any not yet
// tried), those the database refused on their own, and how many heads the
// statements left for a claim (store.Finished.Claimable).
func (f *finisher) write(batch []finishItem) (unwritten, refused []finishItem, claimable int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), statementTimeout)
	defer cancel()
	if len(batch) > 0 && !slices.ContainsFunc(batch, func(it finishItem) bool { return it.job.Epoch != batch[0].job.Epoch }) {
		return f.writeGroup(ctx, batch[0].job.Epoch, batch)
	}
	var epochs []int64
	byEpoch := map[int64][]finishItem{}
	for _, it := range batch {
		if _, ok := byEpoch[it.job.Epoch]; !ok {
			epochs = append(epochs, it.job.Epoch)
		}
		byEpoch[it.job.Epoch] = append(byEpoch[it.job.Epoch], it)
	}
	for i, epoch := range epochs {
		u, r, c, err := f.writeGroup(ctx, epoch, byEpoch[epoch])
		refused = append(refused, r...)
		claimable += c
		if err != nil {
			for _, e := range epochs[i+1:] {
				u = append(u, byEpoch[e]...)
			}
			return u, refused, claimable, err
		}
	}
	return nil, refused, claimable, nil
}

// writeGroup writes the outcomes of one term in one statement. When
// PostgreSQL refuses the statement for what an outcome holds (a data
// exception or an integrity violation: SQLSTATE class 22 or 23), the
// group is split in halves until the refused outcome stands alone, so
// every other outcome is written; the refused one is tried once more with
// its error text replaced, and if the database still refuses it, it is
// returned as refused. Any other failure (the connection, a timeout)
// returns every outcome not yet written, to be tried again as they are.
func (f *finisher) writeGroup(ctx context.Context, epoch int64, items []finishItem) (unwritten, refused []finishItem, claimable int, err error) {
	claimable, items, err = f.finish(ctx, epoch, items)
	if err == nil {
		return nil, nil, claimable, nil
	}
	code, ok := refusal(err)
	if !ok {
		return items, nil, claimable, err
	}
	if len(items) > 1 {
		h := len(items) / 2
		u, r1, c1, err := f.writeGroup(ctx, epoch, items[:h])
		if err != nil {
			return append(u, items[h:]...), r1, claimable + c1, err
		}
		u, r2, c2, err := f.writeGroup(ctx, epoch, items[h:])
		return u, append(r1, r2...), claimable + c1 + c2, err
	}
	it := items[0]
	if it.res.Error != "" {
		plain := it
		plain.res.Error = fmt.Sprintf("pgsched: this outcome's error text could not be stored (SQLSTATE %s)", code)
		if c, _, err2 := f.finish(ctx, epoch, []finishItem{plain}); err2 == nil {
			f.cfg.Logger.Warn("recorded a task's outcome without its error text, which the database refused",
				"ordering_id", it.job.OrderingID, "task_id", it.job.ID, "outcome", it.res.Outcome, "error", err)
			return nil, nil, claimable + c, nil
		}
	}
	f.noteFailure(err)
	f.cfg.Logger.Error("the database refuses this task's outcome; it is set aside and tried again, and the others are written",
		"ordering_id", it.job.OrderingID, "task_id", it.job.ID, "outcome", it.res.Outcome, "error", err)
	return nil, []finishItem{it}, claimable, nil // a slice of its own: the caller appends to it
}

// refusal reports whether err is PostgreSQL refusing a statement for the
// data it was given (SQLSTATE class 22 or 23), and its code.
//
// Citus reports a worker's integrity violation inside a distributed
// transaction as an internal error (XX000) that carries the worker's
// message; such a message counts as the refusal it describes, so one
// refused outcome cannot stall a node there either.
func refusal(err error) (string, bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) < 2 {
		return "", false
	}
	switch {
	case pgErr.Code[:2] == "22", pgErr.Code[:2] == "23":
		return pgErr.Code, true
	case pgErr.Code == "XX000" && relayedRefusal.MatchString(pgErr.Message):
		return pgErr.Code, true
	}
	return "", false
}

// relayedRefusal matches the messages of integrity violations (class 23)
// as PostgreSQL words them.
var relayedRefusal = regexp.MustCompile(`violates (check|unique|foreign key|not-null|exclusion) constraint|null value in column`)

// finish writes the outcomes of one term in one statement and settles
// them: successors handed over start, hooks are told, fenced outcomes
// are logged. On error it returns the items still to write: all of them,
// or on Citus, where a finish split over workers may fail after an
// earlier part committed, those that part did not apply (what it did is
// settled as on success).
func (f *finisher) finish(ctx context.Context, epoch int64, items []finishItem) (int, []finishItem, error) {
	outs := make([]store.Outcome, len(items))
	finished := 0
	for j, it := range items {
		outs[j] = store.Outcome{
			Partition: it.job.Partition, OrderingID: it.job.OrderingID, ID: it.job.ID, ClaimedAt: it.job.ClaimedAt,
			Outcome: it.res.Outcome, RetryIn: it.res.RetryIn, Error: it.res.Error,
		}
		if it.res.Output != nil {
			outs[j].Output = &store.Output{JSON: it.res.Output, ScheduledAt: it.job.ScheduledAt, UniquenessKey: it.job.UniquenessKey}
		}
		if it.res.Outcome == pgschedtype.OutcomeCompleted || it.res.Outcome == pgschedtype.OutcomeDead {
			finished++
		}
	}
	var end func(int, error)
	if tr := f.cfg.Tracer; tr != nil {
		end = tr.StartBatch(ctx, "finish")
	}
	res, err := f.cfg.Store.Finish(ctx, f.cfg.DB, f.cfg.Node.ID(), epoch, outs, f.handover(epoch, finished))
	if end != nil {
		end(len(outs), err)
	}
	if err != nil {
		if len(res.Applied) == 0 && len(res.HandedOver) == 0 {
			return 0, items, err
		}
		done := make(map[int64]bool, len(res.Applied))
		for _, id := range res.Applied {
			done[id] = true
		}
		var applied, rest []finishItem
		for _, it := range items {
			if done[it.job.ID] {
				applied = append(applied, it)
			} else {
				rest = append(rest, it)
			}
		}
		f.settle(epoch, applied, res, len(outs))
		return res.Claimable, rest, err
	}
	f.settle(epoch, items, res, len(outs))
	return res.Claimable, nil, nil
}

// settle does what follows a written batch of n outcomes for the items
// in it: successors handed over start, hooks are told, outcomes not
// applied are logged as fenced.
func (f *finisher) settle(epoch int64, items []finishItem, res store.Finished, n int) {
	next, ids := res.HandedOver, res.Applied
	f.handedShare.Store(int32(100 * len(next) / n))
	if len(next) > 0 {
		f.handedOver(epoch, next)
	}
	settled := make([]*Job, len(items))
	for j, it := range items {
		settled[j] = it.job
	}
	f.settled(settled)
	applied := make(map[int64]bool, len(ids))
	for _, id := range ids {
		applied[id] = true
	}
	for _, it := range items {
		if !applied[it.job.ID] {
			f.cfg.Logger.Warn("outcome not recorded: the task is no longer held by this node's term (fenced)",
				"ordering_id", it.job.OrderingID, "task_id", it.job.ID, "epoch", it.job.Epoch, "outcome", it.res.Outcome)
		}
		if h := f.cfg.Hooks.Finished; h != nil {
			res := it.res
			if !applied[it.job.ID] {
				res = Result{Outcome: pgschedtype.OutcomeFenced}
			}
			h(it.job, res, it.ran)
		}
	}
}

// noteFailure records that outcomes failed to be written: the time of the
// first failure since they last were, and the error.
func (f *finisher) noteFailure(err error) {
	f.failingSince.CompareAndSwap(0, time.Now().UnixNano())
	f.mu.Lock()
	f.lastErr = err
	f.mu.Unlock()
}

// noteWritten records that a batch was written: outcomes are failing no
// longer, unless some are still set aside.
func (f *finisher) noteWritten() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.aside) == 0 && f.refusedOut == 0 {
		f.failingSince.Store(0)
		f.lastErr = nil
	}
}

// unrecorded reports how long outcomes have been failing to be written,
// how many wait, and the last error; zero when none is failing.
func (f *finisher) unrecorded() (time.Duration, int, error) {
	since := f.failingSince.Load()
	if since == 0 {
		return 0, 0, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Since(time.Unix(0, since)), len(f.items) + len(f.aside) + f.inflight, f.lastErr
}

func countRefused(items []finishItem) int {
	n := 0
	for _, it := range items {
		if it.refused {
			n++
		}
	}
	return n
}

// RecordCompletedTx records job as completed inside tx, the transaction of
// a transactional handler, so the handler's writes, the completion and
// its output (nil for none) commit together; the caller commits. It reports false when the claim the
// job ran under no longer holds (its node's term lost the task): the
// caller must roll back. Like every other outcome, it is written by the
// same statement (pgsched.finish_tasks), fenced the same way.
func (d *Dispatcher) RecordCompletedTx(ctx context.Context, tx store.DBTX, job *Job, output []byte) (bool, error) {
	out := store.Outcome{
		Partition: job.Partition, OrderingID: job.OrderingID, ID: job.ID, ClaimedAt: job.ClaimedAt, Outcome: pgschedtype.OutcomeCompleted,
	}
	if output != nil {
		out.Output = &store.Output{JSON: output, ScheduledAt: job.ScheduledAt, UniquenessKey: job.UniquenessKey}
	}
	res, err := d.cfg.Store.Finish(ctx, tx, d.cfg.Node.ID(), job.Epoch, []store.Outcome{out}, store.Handover{})
	if err != nil {
		return false, fmt.Errorf("recording completion: %w", err)
	}
	if len(res.Applied) != 1 {
		d.cfg.Logger.Warn("transactional handler rolled back: the task is no longer held by this node's term",
			"ordering_id", job.OrderingID, "task_id", job.ID, "epoch", job.Epoch)
		return false, nil
	}
	return true, nil
}
