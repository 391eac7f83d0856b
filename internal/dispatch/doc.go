// Package dispatch turns due rows into running handlers and their outcomes
// back into rows, in batches.
//
// # Claiming
//
// The claim loop asks the database which of the node's partitions have due
// queues (one index probe each), then claims from the most overdue partition
// first, as many heads as the node has free slots, moving to the next
// partition only when one runs dry. Each claim is a single
// SELECT ... FOR UPDATE SKIP LOCKED on one partition's due index, whose cost
// does not depend on the backlog, and takes at most the head task of each
// ordering_id.
//
// The loop sleeps until the earliest known due time (an in-memory timer), a
// NOTIFY saying new work is due, a freed slot or finished batch, or the poll
// interval, whichever comes first: future work is pulled, past-due work is
// pushed.
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
// When Run's context ends the loop claims nothing more, waits for running
// handlers up to the drain timeout, then cancels their contexts, gives their
// tasks back (outcome release) and flushes every outcome before returning.
package dispatch
