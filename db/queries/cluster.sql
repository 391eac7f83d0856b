-- LeaderAcquire returns the leader term this node holds, 0 if it does not lead.
-- name: LeaderAcquire :one
SELECT coalesce(pgsched.leader_acquire(sqlc.arg(node_id)::text, sqlc.arg(epoch)::bigint, sqlc.arg(ttl_seconds)::float8), 0)::bigint AS term;

-- name: LeaderResign :one
SELECT pgsched.leader_resign(sqlc.arg(node_id)::text, sqlc.arg(epoch)::bigint)::boolean AS resigned;

-- ClusterMembers lists every registered node, live or not: the leader plans
-- over those not leaving.
-- name: ClusterMembers :many
SELECT n.node_id, n.leaving
FROM pgsched.nodes n
ORDER BY n.node_id;

-- name: PartitionOwners :many
SELECT po.partition_id, coalesce(po.node_id, '')::text AS node_id
FROM pgsched.partition_owners po
ORDER BY po.partition_id;

-- name: BackupsList :many
SELECT b.node_id, b.backup_node_id FROM pgsched.backups b ORDER BY b.node_id;

-- name: AssignmentApply :one
SELECT pgsched.assign(
    sqlc.arg(node_id)::text,
    sqlc.arg(epoch)::bigint,
    sqlc.arg(partition_ids)::integer[],
    sqlc.arg(owners)::text[],
    sqlc.arg(backup_of)::text[],
    sqlc.arg(backup_nodes)::text[]
)::boolean AS applied;

-- name: NodesDeplete :one
SELECT pgsched.deplete(sqlc.arg(node_id)::text, sqlc.arg(epoch)::bigint, sqlc.arg(flex_down_seconds)::float8)::text[] AS depleted;

-- NodeDuties returns what one node serves now: each partition with the node
-- it serves it for (itself, or the down node it stands in for).
-- name: NodeDuties :many
SELECT p.partition_id, coalesce(p.owner_node_id, '')::text AS owner_node_id
FROM pgsched.partitions p
WHERE p.served_by = sqlc.arg(node_id)::text
ORDER BY p.partition_id;

-- name: NodeStandIns :many
SELECT s.node_id FROM pgsched.stand_ins s WHERE s.stand_in_node_id = sqlc.arg(node_id)::text ORDER BY s.node_id;

-- ClusterNotify wakes every node's assignment watcher and the leader.
-- name: ClusterNotify :exec
SELECT pg_notify('pgsched.assign', '');

-- NodeBackedUp lists the nodes this node is the backup of, with seconds
-- until each one's lease ends (negative: ended or deregistered), so the
-- watcher can look again right when a lease runs out.
-- name: NodeBackedUp :many
SELECT b.node_id, coalesce(extract(epoch FROM n.lease_expires_at - now()), -1)::float8 AS expires_in
FROM pgsched.backups b
LEFT JOIN pgsched.nodes n ON n.node_id = b.node_id
WHERE b.backup_node_id = sqlc.arg(node_id)::text
ORDER BY b.node_id;

-- NodesExpiredUnserved lists the nodes whose lease expired and that no
-- serving node stands in for (a stand-in gives back their running tasks
-- itself): the leader's round rescues these.
-- name: NodesExpiredUnserved :many
SELECT n.node_id FROM pgsched.nodes n
WHERE n.lease_expires_at < now()
  AND NOT EXISTS (SELECT 1 FROM pgsched.stand_ins s WHERE s.node_id = n.node_id)
ORDER BY n.node_id;
