-- NodeRegister (re)registers a node with a fresh epoch and lease.
-- name: NodeRegister :one
INSERT INTO pgsched.nodes AS n (node_id, epoch, lease_expires_at, registered_at, renewed_at, host, pid, leaving)
VALUES (sqlc.arg(node_id)::text, nextval('pgsched.epoch_seq'), now() + make_interval(secs => sqlc.arg(ttl_seconds)::float8), now(), now(),
        sqlc.arg(host)::text, sqlc.arg(pid)::integer, sqlc.arg(leaving)::boolean)
ON CONFLICT (node_id) DO UPDATE
SET epoch = excluded.epoch, lease_expires_at = excluded.lease_expires_at, registered_at = excluded.registered_at,
    renewed_at = excluded.renewed_at, host = excluded.host, pid = excluded.pid, leaving = excluded.leaving
RETURNING n.epoch, n.lease_expires_at;

-- NodeRenewLease extends a live lease; no row means the lease was lost (it
-- expired, or another process took the node id) and the node must stop.
-- name: NodeRenewLease :one
UPDATE pgsched.nodes n
SET lease_expires_at = now() + make_interval(secs => sqlc.arg(ttl_seconds)::float8), renewed_at = now()
WHERE n.node_id = sqlc.arg(node_id)::text AND n.epoch = sqlc.arg(epoch)::bigint AND n.lease_expires_at > now()
RETURNING n.lease_expires_at;

-- NodeLeave marks a node that is stopping: it keeps its lease while it
-- drains, but others take its partitions over at once.
-- name: NodeLeave :exec
UPDATE pgsched.nodes n SET leaving = true
WHERE n.node_id = sqlc.arg(node_id)::text AND n.epoch = sqlc.arg(epoch)::bigint;

-- name: NodeDeregister :exec
DELETE FROM pgsched.nodes n WHERE n.node_id = sqlc.arg(node_id)::text AND n.epoch = sqlc.arg(epoch)::bigint;

-- name: NodeCounts :one
SELECT count(*) FILTER (WHERE n.lease_expires_at > now())::integer AS active,
       count(*) FILTER (WHERE n.lease_expires_at <= now())::integer AS inactive
FROM pgsched.nodes n;
