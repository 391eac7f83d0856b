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
// task of each ordering_id. Handlers run on per-ordering_id lanes
// (internal/ordering), at most Concurrency at once.
//
// The loop sleeps until the earliest known due time (an in-memory timer), a
// NOTIFY saying new work is due, a freed slot or finished batch, or the poll
// interval, whichever comes first: future work is pulled, past-due work is
// pushed. It asks for due partitions again only when work may have become
// due since it last asked (outcomes written, a NOTIFY, a new term or set
// of partitions, the timer): a freed slot alone makes nothing due.
//
// # Finishing
//
// Handler outcomes (completed, retry, dead) are queued and written by one
// goroutine in batches, one statement per batch, fenced by the node's epoch.
// A transactional handler records its own completion inside its transaction
// instead.
//
// # Stopping
//
// When Run's context ends the loop claims nothing more, gives back the
// prefetched tasks that have not started, waits for running handlers up to
// the drain timeout, then cancels their contexts, gives their
// tasks back (outcome release) and flushes every outcome before returning.
package dispatch
