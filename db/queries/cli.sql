-- Reads of the operator CLI (cmd/pgsched). Each reads the views only, so
-- that <schema>_read, which may select from the views and nothing else,
-- runs every one. An ordering_id is looked up in its partition, which the
-- caller computes from CLIPartitionCount (the settings table is closed to
-- that role, and on Citus the partitions view cannot be a subquery of a
-- statement on the task tables).

-- CLIPartitionCount is the number of logical partitions: the partitions
-- view has a row for each.
-- name: CLIPartitionCount :one
SELECT count(*)::integer AS partitions FROM pgsched.partitions;

-- CLIKinds is the leader's last count per kind (the kinds view), with
-- since when each paused kind is paused.
-- name: CLIKinds :many
SELECT k.kind::text AS kind, k.pending::bigint AS pending, k.due::bigint AS due, k.running::bigint AS running,
       k.dead::bigint AS dead, k.paused::boolean AS paused, p.paused_at,
       coalesce(k.counted_at, 'epoch')::timestamptz AS counted_at -- epoch: never counted
FROM pgsched.kinds k
LEFT JOIN pgsched.paused p ON p.kind = k.kind
ORDER BY k.kind;

-- CLIKindLag is, per kind with a due task, how long its oldest due head
-- has waited: a task starts only once it heads its ordering_id, so the due
-- heads say how far the fleet is behind. Paused kinds' heads are counted
-- too (they wait for the resume). It reads every due head, as the
-- lateness view does.
-- name: CLIKindLag :many
SELECT t.kind::text AS kind, min(t.run_at)::timestamptz AS oldest_due_at,
       extract(epoch FROM now() - min(t.run_at))::float8 AS lag_seconds
FROM pgsched.tasks t
WHERE t.head AND t.state = 'pending' AND t.run_at <= now()
GROUP BY t.kind
ORDER BY t.kind;

-- CLITasks lists pending and running tasks (the tasks view) of a kind,
-- state and ordering_id when given, in primary key order (by partition,
-- then key: an ordering_id's tasks in run order), which the primary key
-- indexes give without sorting.
-- name: CLITasks :many
SELECT t.id, t.ordering_id, t.scheduled_at, t.uniqueness_key, t.kind, t.payload, t.state,
       t.run_at, t.attempt, coalesce(t.last_error, '')::text AS last_error, coalesce(t.node_id, '')::text AS node_id,
       t.priority, coalesce(t.group_key, '')::text AS group_key
FROM pgsched.tasks t
WHERE (sqlc.narg(kind)::text IS NULL OR t.kind = sqlc.narg(kind)::text)
  AND (sqlc.narg(state)::text IS NULL OR t.state = sqlc.narg(state)::text)
  AND (sqlc.narg(ordering_id)::text IS NULL
       OR (t.partition_id = sqlc.arg(partition_id)::integer AND t.ordering_id = sqlc.narg(ordering_id)::text))
ORDER BY t.partition_id, t.ordering_id, t.scheduled_at, t.uniqueness_key
LIMIT sqlc.arg(max_rows)::integer;

-- CLITaskFind finds the tasks with an id or a uniqueness key, pending,
-- running (at: run_at) or dead (at: died_at); completed tasks are in no
-- view. With an ordering_id it reads that one's partition by primary key;
-- without, every task.
-- name: CLITaskFind :many
SELECT t.state::text AS state, t.id, t.ordering_id, t.scheduled_at, t.uniqueness_key, t.kind, t.payload,
       t.run_at::timestamptz AS at, t.attempt, coalesce(t.last_error, '')::text AS last_error,
       coalesce(t.node_id, '')::text AS node_id, t.partition_id, t.priority, coalesce(t.group_key, '')::text AS group_key
FROM pgsched.tasks t
WHERE (t.id = sqlc.narg(id)::bigint OR t.uniqueness_key = sqlc.narg(uniqueness_key)::text)
  AND (sqlc.narg(ordering_id)::text IS NULL
       OR (t.partition_id = sqlc.arg(partition_id)::integer AND t.ordering_id = sqlc.narg(ordering_id)::text))
UNION ALL
SELECT 'dead', d.id, d.ordering_id, d.scheduled_at, d.uniqueness_key, d.kind, d.payload,
       d.died_at, d.attempt, coalesce(d.last_error, ''), coalesce(d.node_id, ''), d.partition_id, d.priority, coalesce(d.group_key, '')
FROM pgsched.dead d
WHERE (d.id = sqlc.narg(id)::bigint OR d.uniqueness_key = sqlc.narg(uniqueness_key)::text)
  AND (sqlc.narg(ordering_id)::text IS NULL
       OR (d.partition_id = sqlc.arg(partition_id)::integer AND d.ordering_id = sqlc.narg(ordering_id)::text))
ORDER BY 3, 4, 5, 1;

-- CLIDead lists dead tasks, newest first, that every filter given selects:
-- an id, a kind, an ordering_id, died at or after, died before (as
-- pgsched.dead_ids selects them for retry_dead_where and
-- delete_dead_where).
-- name: CLIDead :many
SELECT d.id, d.died_at, d.kind, d.ordering_id, d.scheduled_at, d.uniqueness_key, d.attempt, d.payload,
       coalesce(d.last_error, '')::text AS last_error, coalesce(d.node_id, '')::text AS node_id
FROM pgsched.dead d
WHERE (sqlc.narg(id)::bigint IS NULL OR d.id = sqlc.narg(id)::bigint)
  AND (sqlc.narg(kind)::text IS NULL OR d.kind = sqlc.narg(kind)::text)
  AND (sqlc.narg(ordering_id)::text IS NULL
       OR (d.partition_id = sqlc.arg(partition_id)::integer AND d.ordering_id = sqlc.narg(ordering_id)::text))
  AND (sqlc.narg(died_after)::timestamptz IS NULL OR d.died_at >= sqlc.narg(died_after)::timestamptz)
  AND (sqlc.narg(died_before)::timestamptz IS NULL OR d.died_at < sqlc.narg(died_before)::timestamptz)
ORDER BY d.died_at DESC, d.id DESC
LIMIT sqlc.arg(max_rows)::integer;
