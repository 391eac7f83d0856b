// Package lease is pgsched's cluster membership: node leases, the leader,
// partition ownership, backups and stand-ins. Every decision is taken on
// the database clock and every write is fenced, so a node that is slow,
// frozen or partitioned away can be wrong about its own state for a while
// without ever being able to act on it.
//
// # A node's lease (node.go)
//
// Each worker process is a node: a row in pgsched.nodes with a lease that
// it renews every TTL/3. Every registration gets a new epoch from a
// sequence; claims and outcomes carry it, and the SQL only accepts them
// while (node_id, epoch) holds a live lease. A node's own deadline is the
// time its last successful renewal was sent plus the TTL (never later than
// the database's), so it stops claiming and cancels its handlers before the
// database lets anybody else take its work.
//
//	          register (new epoch)
//	┌────────┐ ───────────────────▶ ┌──────┐  renew every TTL/3
//	│ no     │                      │ term │ ◀──────────────────┐
//	│ lease  │ ◀─────────────────── │ live │ ───────────────────┘
//	└────────┘  renewal refused, or └──────┘
//	    ▲        local deadline passed   │ Stop (SIGTERM): drain, release,
//	    │        (handlers cancelled)     │ deregister, NOTIFY
//	    └─────────────────────────────────┘
//
// Registering (pgsched.node_register) can be refused for a while, and the
// node waits (Node.Waiting says why, the worker's readiness too):
//
//   - the node id's live lease belongs to another process: each process
//     draws a random instance, and two processes never hold one node id at
//     once; a restart after a crash waits for its predecessor's lease;
//   - the server is the primary of a new timeline (a promoted standby): a
//     term is valid only on the timeline it registered on, so every term
//     of the old primary ends at its first renewal there, and nobody
//     registers until one TTL after the first try, when every node of the
//     old primary has passed its local deadline. A promoted asynchronous
//     standby may have lost renewals and claims; this keeps its stale rows
//     from letting two nodes run one ordering_id.
//
// # Fencing reaches the side effect
//
// The database fences writes: a claim or an outcome carries (node, epoch)
// and changes nothing once that term is gone. A side effect outside the
// database (a webhook's POST, an e-mail) has no such guard, so the node
// guards it itself: Term.Live is false once the term's context ended or
// its local deadline passed, read from the monotonic clock at the moment
// of asking. A node that wakes from a freeze (SIGSTOP, a paused VM) with
// every timer overdue may run other goroutines before its lease goroutine
// notices the loss; Live is right for them all the same. The dispatcher
// asks before it starts each handler (claimed tasks, tasks claimed ahead
// when their time comes, tasks waiting for a free handler, successors
// handed over), and gives back what it may no longer run; the webhook
// executor asks again right before it sends (pgsched.CheckFence).
//
// What remains is the window between the last check and the effect: a
// handler already running, or a request already on the wire, when the
// node froze completes when it thaws, while the stand-in may have run the
// task again. Its outcome is fenced; the effect happened twice, which
// at-least-once delivery allows (receivers deduplicate by task key and
// attempt). A handler can shrink the window by calling pgsched.CheckFence
// right before each irreversible step.
//
//	claimed ─▶ waits (its time, a free handler) ─▶ Live? ─no─▶ given back
//	                                                 │yes
//	                                                 ▼
//	                          handler runs ─▶ Live? ─no─▶ not sent (retry;
//	                                            │yes        outcome fenced)
//	                                            ▼
//	                                          send
//
// # The leader (leader.go, plan.go)
//
// Every node runs a Leader that tries pgsched.leader_acquire every
// Interval (and on every cluster notification). The single leader row is
// taken when it is absent, expired, or held by a node whose own lease is
// gone; it is renewed while held and deleted on a clean stop, so another
// node takes over at once. Each new leadership gets a new term.
//
//	┌──────────┐  acquire: row absent/expired/holder gone   ┌────────┐
//	│ follower │ ─────────────────────────────────────────▶ │ leader │
//	│          │ ◀───────────────────────────────────────── │ term T │
//	└──────────┘  renewal refused, own lease lost, or stop  └────────┘
//	               (stop: leader_resign, NOTIFY)              │  ▲
//	                                                 round    └──┘
//
// While leading, each round runs the leader's duties (internal/maintenance:
// depletion, this package's plan, rescue, pause and limit sweeps, cancel
// prune, completion partitions, recurring ticks). The plan (Planner.Round,
// fenced on the leader row) is AssignPartitions and AssignBackups over the
// member nodes (every registered node, live or down), written only when it
// changed.
//
// # Duties: what a node claims from (duties.go)
//
// A node serves the partitions it owns while its lease is live. When a
// member's lease is not live (expired, or its row is gone) its partitions
// are served by its backup, or if that is down too, by the first live node
// along the backup chain: the stand-in. This rule is SQL, the
// pgsched.stand_ins and pgsched.partitions views, and nodes read their
// duties from those same views, so psql shows exactly what they do.
//
//	owner live ──▶ owner serves ─(owner's lease ends)─▶ stand-in serves
//	     ▲                                                │        │
//	     └──────── owner re-registers (new epoch) ────────┘        │
//	                                    FlexDown passes: depleted, │
//	                    partitions reassigned to live nodes ◀──────┘
//
// A node stopping cleanly (SIGTERM) first marks itself leaving: it keeps
// renewing its lease, so the outcomes of the tasks it drains still count,
// but from that moment the views treat it as down (its backup serves its
// partitions) and the leader plans without it (its partitions move). It
// deregisters when its drain ends.
//
// A stand-in starting gives the down node's in-flight tasks back to their
// ordering_ids at once (no per-task timeout). A stand-in also re-reads its duties
// the moment the lease of a node it backs up would run out, so failover
// takes the TTL plus one database round trip.
//
// Hand-overs (a partition moving between owners, a stand-in starting or
// stopping) need no coordination between the two nodes: a task is claimed
// with FOR UPDATE SKIP LOCKED on its ordering queue, a queue with a running
// head is never claimed, and the heads table's primary key (partition,
// ordering_id) is the database's backstop, since only an ordering_id's
// head runs, so two nodes
// claiming one partition for a moment can neither run one task twice nor
// break the order of an ordering_id.
//
// Every transition is logged (slog: node registered, lease lost,
// leadership won/lost/resigned, partitions assigned, partitions gained and
// lost, stand-in started/stopped, node depleted), counted in the metrics of
// internal/metrics, and visible in pgsched.cluster.
package lease
