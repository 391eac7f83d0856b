// Package dispatch turns due rows into running handlers and their outcomes
// back into rows, in batches.
//
// # Claiming
//
// The claim loop asks the database which of the node's partitions have due
// heads (one index probe each), then claims from the most overdue partition
// first, in one transaction across partitions, as many heads as the node
// has room for (Concurrency running plus Prefetch waiting for a handler),
// moving to the next partition only when one runs dry. Each partition's
// claim is a single SELECT ... FOR UPDATE SKIP LOCKED on its due index,
// whose cost does not depend on the backlog, and takes at most the head
// task of each ordering_id. Handlers run in a pool of Concurrency
// goroutines that keeps one ordering_id's tasks in order
// (internal/ordering); claimed tasks beyond that wait in its queue, and
// those of a term that ended go back at once.
//
// With task priorities in use the claim takes the due heads of each
// priority in turn, highest first, across the partitions, and also looks
// for those above 0 in the node's partitions it did not read as due: a
// high-priority task enqueued meanwhile is claimed next, not after the
// backlog the due list holds. A claim that stopped at such a priority
// leaves the due list whole (the lower ones are still there). The queue
// stays first in, first out: it holds at most Prefetch tasks, so a
// high-priority task waits behind at most that many claimed before it.
//
// The loop sleeps until the earliest known due time (an in-memory timer), a
// NOTIFY saying new work is due, a freed slot or finished batch, or the poll
// interval, whichever comes first: future work is pulled, past-due work is
// pushed. It asks for due partitions again only when work may have become
// due since it last asked (outcomes written that left heads for a claim:
// successors not handed over, tasks given back; a NOTIFY, a new term or
// set of partitions, the timer), and after a claim that took the last
// tasks due within ClaimAhead, whose partitions may hold tasks due a
// little later that the read before did not show: a freed slot alone
// makes nothing due, and neither does a finish that handed every
// successor over.
//
// # Finishing
//
// Handler outcomes (completed, retry, dead) are queued and written in
// batches, one statement per batch, fenced by the node's epoch; outcomes
// that arrive while a statement runs gather for the next.
// A transactional handler records its own completion inside its transaction
// instead.
//
// # Handing over
//
// When a finished task's ordering_id has a next task that is due, the
// finish statement that promotes it to head starts it on this node right
// away, as a claim would (running, attempt counted, this node's epoch), and
// returns it; the loop runs it like a claimed task. The successor would
// otherwise sit idle until the node's next claim found it, and the claim's
// index scan and update cost as much as the promotion itself. At most one
// per task finished in the batch is handed over, only in partitions the
// node serves, only under a live lease, and at most 16 in a row per
// ordering_id (then the next waits for a claim, which takes the
// longest-waiting heads first, so ordering_ids queued behind long chains
// get their turn), and none below the highest priority in use (it waits
// for a claim, which takes higher priorities first). A node may so hold up to one batch more than
// Concurrency plus Prefetch for a moment; the loop claims nothing until
// it is back under. When most outcomes hand over, the finish statement is
// where the node's claiming happens and one at a time bounds the node, so
// two run at once, as two pipelines: a batch is split over both, and each
// half's successors, once run, go out in that pipeline's next statement
// as soon as it is back, without waiting for the other (their
// ordering_ids are disjoint: one outcome per ordering_id is pending at a
// time).
//
// # Reconciling
//
// A claim or finish statement can commit on the server while its response
// never reaches the node (a dropped connection, a timeout racing the
// commit). The tasks it claimed or handed over then run under the node's
// live term, so no rescue would touch them, and the node does not know of
// them. After such a failure (ReconcileDelay later, and again once the
// statement has surely ended on the server) the loop reads which tasks the
// database says the term runs, with claims paused and outcome statements
// held off so that everything handed over is known, and gives back those
// it does not know of (logged; metric pgsched_tasks_reconciled_total).
// It reads the heads table whole (running heads have no index), which is
// why it waits for a failure rather than running on a timer.
//
// # Stopping
//
// When Run's context ends the loop claims nothing more, gives back the
// prefetched tasks that have not started, waits for running handlers up to
// the drain timeout, then cancels their contexts, gives their
// tasks back (outcome release) and flushes every outcome before returning.
package dispatch
