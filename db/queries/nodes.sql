-- NodeRegister starts a new term for a node, or says why it must wait
-- (see node_register).
-- name: NodeRegister :one
SELECT coalesce(r.epoch, 0)::bigint AS epoch, coalesce(r.lease_expires_at, r.db_now)::timestamptz AS lease_expires_at,
       coalesce(r.wait_reason, '')::text AS wait_reason, coalesce(r.wait_until, r.db_now)::timestamptz AS wait_until,
       coalesce(r.holder_host, '')::text AS holder_host, coalesce(r.holder_pid, 0)::integer AS holder_pid,
       r.timeline::integer AS timeline, coalesce(r.timeline_since, r.db_now)::timestamptz AS timeline_since,
       r.db_now::timestamptz AS db_now
FROM pgsched.node_register(sqlc.arg(node_id)::text, sqlc.arg(instance)::text, sqlc.arg(ttl_seconds)::float8,
                           sqlc.arg(host)::text, sqlc.arg(pid)::integer, sqlc.arg(leaving)::boolean,
                           sqlc.arg(after_epoch)::bigint)
     AS r(epoch, lease_expires_at, wait_reason, wait_until, holder_host, holder_pid, timeline, timeline_since, db_now);

-- NodeRenewLease extends a live lease; no row means the lease was lost (it
-- expired, the node id was registered again, or the server is the primary
-- of another timeline than the term's: a failover) and the node must stop.
-- name: NodeRenewLease :one
UPDATE pgsched.nodes n
SET lease_expires_at = now() + make_interval(secs => sqlc.arg(ttl_seconds)::float8), renewed_at = now()
WHERE n.node_id = sqlc.arg(node_id)::text AND n.epoch = sqlc.arg(epoch)::bigint AND n.lease_expires_at > now()
  AND n.timeline = pgsched.timeline()
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
