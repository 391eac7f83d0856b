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

-- ConsoleKinds counts, per kind, the tasks pending and due now, running,
-- and dead, and whether the kind is paused.
-- name: ConsoleKinds :many
WITH pend AS (
    SELECT p.kind, sum(p.pending)::bigint AS pending, sum(p.due)::bigint AS due FROM pgsched.pending p GROUP BY p.kind
), run AS (
    SELECT h.kind, count(*)::bigint AS running FROM pgsched.heads h WHERE h.running GROUP BY h.kind
), dead AS (
    SELECT d.kind, count(*)::bigint AS dead FROM pgsched.dead_tasks d GROUP BY d.kind
), kinds AS (
    SELECT pend.kind FROM pend UNION SELECT run.kind FROM run UNION SELECT dead.kind FROM dead
    UNION SELECT k.kind FROM pgsched.paused_kinds k
)
SELECT k.kind::text AS kind, coalesce(pend.pending, 0)::bigint AS pending, coalesce(pend.due, 0)::bigint AS due,
       coalesce(run.running, 0)::bigint AS running, coalesce(dead.dead, 0)::bigint AS dead,
       EXISTS (SELECT 1 FROM pgsched.paused_kinds pk WHERE pk.kind = k.kind) AS paused
FROM kinds k
LEFT JOIN pend ON pend.kind = k.kind
LEFT JOIN run ON run.kind = k.kind
LEFT JOIN dead ON dead.kind = k.kind
ORDER BY k.kind;

-- name: ConsoleLateness :one
SELECT coalesce(extract(epoch FROM l.lateness), 0)::float8 AS lateness_seconds, l.due_queues::bigint AS due_queues
FROM pgsched.lateness l;

-- name: ConsoleDead :many
SELECT d.id, d.died_at, d.kind, d.ordering_id, d.scheduled_at, d.uniqueness_key, d.attempt,
       coalesce(d.last_error, '')::text AS last_error, coalesce(d.node_id, '')::text AS node_id
FROM pgsched.dead d
WHERE (sqlc.narg(kind)::text IS NULL OR d.kind = sqlc.narg(kind)::text)
ORDER BY d.died_at DESC
LIMIT sqlc.arg(max_rows)::integer;
