-- name: TaskScheduleMany :one
SELECT pgsched.schedule_many(
    sqlc.arg(ordering_ids)::text[],
    sqlc.arg(scheduled_ats)::timestamptz[],
    sqlc.arg(uniqueness_keys)::text[],
    sqlc.arg(payloads)::jsonb[],
    sqlc.arg(kinds)::text[]
)::text[] AS results;

-- name: TaskCancel :exec
SELECT pgsched.cancel(sqlc.arg(ordering_id)::text, sqlc.arg(scheduled_at)::timestamptz, sqlc.arg(uniqueness_key)::text);

-- name: TaskReschedule :exec
SELECT pgsched.reschedule(
    sqlc.arg(ordering_id)::text,
    sqlc.arg(scheduled_at)::timestamptz,
    sqlc.arg(uniqueness_key)::text,
    sqlc.arg(new_scheduled_at)::timestamptz
);

-- TaskClaimDue claims the head task of up to max_tasks due ordering queues of
-- one partition for a node whose lease is live. Queues are locked with SKIP
-- LOCKED in a CTE (never IN (subquery ... FOR UPDATE), which can update more
-- rows than the limit); the task update re-checks state and run_at so a task
-- cancelled or rescheduled since this statement's snapshot is left alone.
-- name: TaskClaimDue :many
WITH me AS (
    SELECT 1 FROM pgsched.nodes n
    WHERE n.node_id = sqlc.arg(node_id)::text AND n.epoch = sqlc.arg(epoch)::bigint AND n.lease_expires_at > now()
), q AS (
    SELECT qq.partition_id, qq.ordering_id FROM pgsched.queues qq
    WHERE qq.partition_id = sqlc.arg(partition_id)::integer AND NOT qq.running AND qq.next_at <= now()
      AND EXISTS (SELECT 1 FROM me)
    ORDER BY qq.next_at
    LIMIT sqlc.arg(max_tasks)::integer
    FOR UPDATE SKIP LOCKED
), h AS (
    SELECT hd.* FROM q
    CROSS JOIN LATERAL (
        SELECT t.id, t.ordering_id, t.scheduled_at, t.uniqueness_key FROM pgsched.tasks t
        WHERE t.partition_id = sqlc.arg(partition_id)::integer AND t.ordering_id = q.ordering_id
        ORDER BY t.scheduled_at, t.id LIMIT 1
    ) hd
), claimed AS (
    -- Joined on the whole primary key, so each head is one index probe
    -- whatever the planner believes about the table's size.
    UPDATE pgsched.tasks t
    SET state = 'running', node_id = sqlc.arg(node_id)::text, epoch = sqlc.arg(epoch)::bigint,
        attempt = t.attempt + 1, claimed_at = now()
    FROM h
    WHERE t.partition_id = sqlc.arg(partition_id)::integer AND t.ordering_id = h.ordering_id
      AND t.scheduled_at = h.scheduled_at AND t.uniqueness_key = h.uniqueness_key AND t.id = h.id
      AND t.state = 'pending' AND t.run_at <= now()
    RETURNING t.partition_id, t.id, t.ordering_id, t.scheduled_at, t.uniqueness_key, t.kind, t.payload,
              t.attempt, t.run_at, t.claimed_at
), marked AS (
    UPDATE pgsched.queues qq SET running = true
    FROM claimed c
    WHERE qq.partition_id = sqlc.arg(partition_id)::integer AND qq.ordering_id = c.ordering_id
)
SELECT c.partition_id, c.id, c.ordering_id, c.scheduled_at, c.uniqueness_key, c.kind, c.payload,
       c.attempt, c.run_at, c.claimed_at::timestamptz AS claimed_at
FROM claimed c;

-- name: TaskFinish :one
SELECT pgsched.finish_tasks(
    sqlc.arg(node_id)::text,
    sqlc.arg(epoch)::bigint,
    sqlc.arg(partition_ids)::integer[],
    sqlc.arg(ordering_ids)::text[],
    sqlc.arg(task_ids)::bigint[],
    sqlc.arg(outcomes)::text[],
    sqlc.arg(retry_delays)::float8[],
    sqlc.arg(errors)::text[]
)::bigint[] AS applied;

-- name: TaskRescueExpired :one
SELECT pgsched.rescue_expired(sqlc.narg(nodes)::text[])::integer AS rescued;

-- QueueNextDue returns, for each given partition that has an idle queue,
-- how many seconds until its earliest one is due (negative: overdue), on the
-- database's clock. One index probe per partition.
-- name: QueueNextDue :many
SELECT n.partition_id::integer AS partition_id, extract(epoch FROM n.next_at - now())::float8 AS due_in
FROM (
    SELECT p.partition_id,
           (SELECT min(q.next_at) FROM pgsched.queues q
            WHERE q.partition_id = p.partition_id AND NOT q.running) AS next_at
    FROM unnest(sqlc.arg(partition_ids)::integer[]) AS p(partition_id)
) n
WHERE n.next_at IS NOT NULL;

-- name: SettingsGet :one
SELECT partition_count, extract(epoch FROM grace)::float8 AS grace_seconds, extract(epoch FROM completion_retention)::float8 AS retention_seconds,
       max_payload_bytes, now()::timestamptz AS db_now
FROM pgsched.settings;

-- name: CompletionEnsurePartitions :one
SELECT pgsched.ensure_completion_partitions(now(), sqlc.arg(days_ahead)::integer)::integer AS dropped;

-- name: TaskCountPending :one
SELECT count(*)::bigint AS pending FROM pgsched.tasks t WHERE t.state = 'pending';
