// Package maintenance holds the cluster's periodic duties, each a small
// service in a file of its own, and the Runner that runs them.
//
// The leader's round (internal/lease.Leader) runs the leader's duties in
// order, each when its interval has passed:
//
//	deplete         nodes gone past the flex-down window: tasks back, rows gone
//	plan            partitions and backups over the members (internal/lease),
//	                before the duties that read heads: a joining node gets
//	                its partitions without waiting for them
//	rescue          running tasks of expired nodes nobody stands in for
//	                (every round), and of any node whose lease is not live
//	                (now and then: it reads every running task)
//	pause sweep     heads of paused kinds written since their pause, marked
//	limit sweep     heads of limited kinds written around a set or clear, parked
//	cancel prune    cancel requests of tasks that have ended, deleted
//	completions     completion partitions created ahead, expired ones dropped
//	recurring       the ticks of due recurring schedules (internal/recurring)
//
// Kind counts, which read every task and can outlast a lease, run beside
// the rounds on their own schedule while the node leads. Every node, leader
// or not, adds its outcomes to the throughput history each maintenance
// round (stats flush).
//
// A failing duty is logged and tried again at its next turn; it does not
// hold up the others.
package maintenance
