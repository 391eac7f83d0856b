-- Reads of the web console (pgschedui): each page one or two statements
-- over the views psql users read.

-- name: ConsoleNodes :many
SELECT c.node_id, c.epoch, c.live, c.leaving, extract(epoch FROM c.since_renewal)::float8 AS since_renewal_seconds,
       c.leader::boolean AS leader, c.partitions::integer[] AS partitions, coalesce(c.backup, '')::text AS backup,
       c.standing_in_for::text[] AS standing_in_for, c.host, c.pid
FROM pgsched.cluster c
ORDER BY c.node_id;

-- name: ConsolePartitions :many
SELECT p.partition_id, coalesce(p.owner_node_id, '')::text AS owner, p.owner_live::boolean AS owner_live, coalesce(p.served_by, '')::text AS served_by
FROM pgsched.partitions p
ORDER BY p.partition_id;

-- ConsoleKinds reads the leader's last count per kind (the kinds view):
-- counting on every page view would read every task.
-- name: ConsoleKinds :many
SELECT k.kind::text AS kind, k.pending::bigint AS pending, k.due::bigint AS due, k.running::bigint AS running,
       k.dead::bigint AS dead, k.paused::boolean AS paused, k.held::bigint AS held
FROM pgsched.kinds k
ORDER BY k.kind;

-- ConsoleLateness is how long the due head that has waited longest has
-- waited (the lateness view's first column), found with one probe of the
-- claim index per partition (queue_next_due, which Citus routes partition
-- by partition): counting the due heads, as the view does, reads every one
-- of them when millions are due.
-- name: ConsoleLateness :one
SELECT coalesce(greatest(-min(n.due_in), 0), 0)::float8 AS lateness_seconds
FROM pgsched.queue_next_due((SELECT array_agg(p) FROM pgsched.settings s, generate_series(0, s.partition_count - 1) AS p)) n;

-- name: ConsoleDead :many
SELECT d.id, d.died_at, d.kind, d.ordering_id, d.scheduled_at, d.uniqueness_key, d.attempt,
       coalesce(d.last_error, '')::text AS last_error, coalesce(d.node_id, '')::text AS node_id
FROM pgsched.dead_tasks d
WHERE (sqlc.narg(kind)::text IS NULL OR d.kind = sqlc.narg(kind)::text)
ORDER BY d.died_at DESC
LIMIT sqlc.arg(max_rows)::integer;

-- ConsoleDeadTask is one dead task, whole.
-- name: ConsoleDeadTask :many
SELECT d.id, d.died_at, d.kind, d.ordering_id, d.scheduled_at, d.uniqueness_key, d.attempt, d.payload,
       coalesce(d.last_error, '')::text AS last_error, coalesce(d.node_id, '')::text AS node_id, d.partition_id,
       d.priority, coalesce(d.group_key, '')::text AS group_key
FROM pgsched.dead_tasks d
WHERE d.id = sqlc.arg(id)::bigint;

-- ConsoleTaskKey finds a key wherever it is: pending or running (heads and
-- backlog, by primary key in its partition), completed (tombstones, with
-- the handler's output in the payload column) or dead. Several rows when a
-- key died and was scheduled again.
-- name: ConsoleTaskKey :many
WITH k AS (
    SELECT pgsched.partition_of(sqlc.arg(ordering_id)::text, s.partition_count) AS p FROM pgsched.settings s
)
SELECT t.state::text AS state, t.id::bigint AS id, t.kind, t.payload, t.run_at::timestamptz AS at, t.attempt,
       coalesce(t.last_error, '')::text AS last_error, coalesce(t.node_id, '')::text AS node_id, t.partition_id,
       t.priority, coalesce(t.group_key, '')::text AS group_key
FROM pgsched.tasks t, k
WHERE t.partition_id = k.p AND t.ordering_id = sqlc.arg(ordering_id)::text
  AND t.scheduled_at = sqlc.arg(scheduled_at)::timestamptz AND t.uniqueness_key = sqlc.arg(uniqueness_key)::text
UNION ALL
SELECT 'completed', 0::bigint, c.kind, c.output, c.completed_at, c.attempt, '', coalesce(c.node_id, ''), c.partition_id, 0, ''
FROM pgsched.completions c, k
WHERE c.partition_id = k.p AND c.ordering_id = sqlc.arg(ordering_id)::text
  AND c.scheduled_at = sqlc.arg(scheduled_at)::timestamptz AND c.uniqueness_key = sqlc.arg(uniqueness_key)::text
UNION ALL
SELECT 'dead', d.id, d.kind, d.payload, d.died_at, d.attempt, coalesce(d.last_error, ''), coalesce(d.node_id, ''), d.partition_id,
       d.priority, coalesce(d.group_key, '')
FROM pgsched.dead_tasks d, k
WHERE d.partition_id = k.p AND d.ordering_id = sqlc.arg(ordering_id)::text
  AND d.scheduled_at = sqlc.arg(scheduled_at)::timestamptz AND d.uniqueness_key = sqlc.arg(uniqueness_key)::text;

-- name: ConsoleCounted :one
SELECT k.counted_at, extract(epoch FROM k.took)::float8 AS took_seconds, now()::timestamptz AS db_now
FROM pgsched.kind_counted k;

-- The tasks page's three lists, each shaped so that a database with
-- millions of tasks answers in milliseconds with a cached generic plan:
-- an ordering_id's tasks by primary key in its partition; running tasks
-- from the heads alone (read whole: no index covers running, so a claim
-- stays a HOT update); otherwise the first tasks in primary key order,
-- which the primary key indexes give without sorting.

-- name: ConsoleTasksOfOrdering :many
SELECT t.id, t.ordering_id, t.scheduled_at, t.uniqueness_key, t.kind, t.payload, t.state,
       t.run_at, t.attempt, coalesce(t.last_error, '')::text AS last_error, coalesce(t.node_id, '')::text AS node_id,
       t.priority, coalesce(t.group_key, '')::text AS group_key
FROM pgsched.tasks t
WHERE t.partition_id = pgsched.partition_of(sqlc.arg(ordering_id)::text, (SELECT s.partition_count FROM pgsched.settings s))
  AND t.ordering_id = sqlc.arg(ordering_id)::text
ORDER BY t.scheduled_at, t.uniqueness_key
LIMIT sqlc.arg(max_rows)::integer;

-- name: ConsoleTasksRunning :many
SELECT h.id, h.ordering_id, h.scheduled_at, h.uniqueness_key, h.kind, h.payload, 'running'::text AS state,
       h.run_at, h.attempt, coalesce(h.last_error, '')::text AS last_error, coalesce(h.node_id, '')::text AS node_id,
       h.priority, coalesce(h.group_key, '')::text AS group_key
FROM pgsched.heads h
WHERE h.running AND (sqlc.narg(kind)::text IS NULL OR h.kind = sqlc.narg(kind)::text)
ORDER BY h.claimed_at
LIMIT sqlc.arg(max_rows)::integer;

-- name: ConsoleTasks :many
SELECT t.id, t.ordering_id, t.scheduled_at, t.uniqueness_key, t.kind, t.payload, t.state,
       t.run_at, t.attempt, coalesce(t.last_error, '')::text AS last_error, coalesce(t.node_id, '')::text AS node_id,
       t.priority, coalesce(t.group_key, '')::text AS group_key
FROM pgsched.tasks t
WHERE (sqlc.narg(kind)::text IS NULL OR t.kind = sqlc.narg(kind)::text)
  AND (sqlc.narg(state)::text IS NULL OR t.state = sqlc.narg(state)::text)
ORDER BY t.partition_id, t.ordering_id, t.scheduled_at, t.uniqueness_key
LIMIT sqlc.arg(max_rows)::integer;

-- name: ConsoleNow :one
SELECT now()::timestamptz AS now;
