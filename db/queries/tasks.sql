-- name: TaskScheduleMany :one
SELECT pgsched.schedule_many(
    sqlc.arg(ordering_ids)::text[],
    sqlc.arg(scheduled_ats)::timestamptz[],
    sqlc.arg(uniqueness_keys)::text[],
    sqlc.arg(payloads)::jsonb[],
    sqlc.arg(kinds)::text[],
    sqlc.arg(new_keys)::boolean,
    sqlc.narg(traceparents)::text[],
    sqlc.narg(priorities)::integer[],
    sqlc.narg(group_keys)::text[]
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

-- TaskClaimDue claims the head task of up to max_tasks due ordering queues
-- from the given partitions, in order, for a node whose lease is live (see
-- pgsched.claim_due_many), in one transaction; heads of a priority other
-- than 0 also from served_partitions.
-- name: TaskClaimDue :many
SELECT c.partition_id, c.id, c.ordering_id, c.scheduled_at, c.uniqueness_key, c.kind, c.payload,
       c.attempt, c.run_at, c.claimed_at::timestamptz AS claimed_at, c.tick, coalesce(c.traceparent, '')::text AS traceparent,
       c.priority, coalesce(c.group_key, '')::text AS group_key
FROM pgsched.claim_due_many(sqlc.arg(node_id)::text, sqlc.arg(epoch)::bigint, sqlc.arg(partition_ids)::integer[],
                            sqlc.arg(max_tasks)::integer, sqlc.arg(ahead_seconds)::float8,
                            sqlc.narg(served_partitions)::integer[], sqlc.narg(min_priority)::integer) AS c;

-- TaskClaimDueOn is TaskClaimDue for partitions on one Citus worker,
-- delegated to it (see pgsched.claim_due_on).
-- name: TaskClaimDueOn :many
SELECT c.partition_id, c.id, c.ordering_id, c.scheduled_at, c.uniqueness_key, c.kind, c.payload,
       c.attempt, c.run_at, c.claimed_at::timestamptz AS claimed_at, c.tick, coalesce(c.traceparent, '')::text AS traceparent,
       c.priority, coalesce(c.group_key, '')::text AS group_key
FROM pgsched.claim_due_on(sqlc.arg(anchor)::integer, sqlc.arg(node_id)::text, sqlc.arg(epoch)::bigint,
                          sqlc.arg(partition_ids)::integer[], sqlc.arg(max_tasks)::integer, sqlc.arg(ahead_seconds)::float8,
                          sqlc.narg(served_partitions)::integer[], sqlc.narg(min_priority)::integer) AS c;

-- TaskClaimLimited claims parked tasks of limited kinds as their limits
-- allow (see pgsched.claim_limited): on Citus, run on the coordinator
-- beside the claims delegated to the Citus workers.
-- name: TaskClaimLimited :many
SELECT c.partition_id, c.id, c.ordering_id, c.scheduled_at, c.uniqueness_key, c.kind, c.payload,
       c.attempt, c.run_at, c.claimed_at::timestamptz AS claimed_at, c.tick, coalesce(c.traceparent, '')::text AS traceparent,
       c.priority, coalesce(c.group_key, '')::text AS group_key
FROM pgsched.claim_limited(sqlc.arg(node_id)::text, sqlc.arg(epoch)::bigint, sqlc.arg(partition_ids)::integer[],
                           sqlc.arg(max_tasks)::integer, sqlc.arg(ahead_seconds)::float8) AS c;

-- QueueNextDueLimited: the partitions due for parked tasks of limited
-- kinds (see pgsched.queue_next_due_limited); on Citus, run on the
-- coordinator beside the due reads delegated to the Citus workers.
-- name: QueueNextDueLimited :many
SELECT q.partition_id::integer AS partition_id, q.due_in::float8 AS due_in
FROM pgsched.queue_next_due_limited(sqlc.arg(partition_ids)::integer[]) q;

-- LimitsInUse says whether any kind has a limit.
-- name: LimitsInUse :one
SELECT EXISTS (SELECT 1 FROM pgsched.kind_limits) AS in_use;

-- TaskFinish records a batch of outcomes (see pgsched.finish_tasks). The
-- row marked summary carries the ids that changed (applied) and how many
-- heads were left for a claim (claimable); each other row is a successor
-- handed straight to the node as running, shaped like a claimed task. The
-- summary row's task columns are placeholders, so that every column scans
-- into a plain Go value.
-- name: TaskFinish :many
SELECT (r.applied IS NOT NULL)::boolean AS summary, r.applied::bigint[] AS applied,
       coalesce(r.partition_id, 0)::integer AS partition_id, coalesce(r.id, 0)::bigint AS id,
       coalesce(r.ordering_id, '')::text AS ordering_id, coalesce(r.scheduled_at, 'epoch')::timestamptz AS scheduled_at,
       coalesce(r.uniqueness_key, '')::text AS uniqueness_key, coalesce(r.kind, '')::text AS kind,
       coalesce(r.payload, 'null')::jsonb AS payload, coalesce(r.attempt, 0)::integer AS attempt,
       coalesce(r.run_at, 'epoch')::timestamptz AS run_at, coalesce(r.claimed_at, 'epoch')::timestamptz AS claimed_at,
       coalesce(r.claimable, 0)::integer AS claimable, coalesce(r.tick, false)::boolean AS tick,
       coalesce(r.traceparent, '')::text AS traceparent, coalesce(r.priority, 0)::integer AS priority,
       coalesce(r.group_key, '')::text AS group_key
FROM pgsched.finish_tasks(
    sqlc.arg(node_id)::text,
    sqlc.arg(epoch)::bigint,
    sqlc.arg(partition_ids)::integer[],
    sqlc.arg(ordering_ids)::text[],
    sqlc.arg(task_ids)::bigint[],
    sqlc.arg(claimed_ats)::timestamptz[],
    sqlc.arg(outcomes)::text[],
    sqlc.arg(retry_delays)::float8[],
    sqlc.arg(errors)::text[],
    sqlc.arg(chain_max)::integer,
    sqlc.arg(chain_partitions)::integer[],
    sqlc.arg(chain_limit)::integer
) AS r(applied, partition_id, id, ordering_id, scheduled_at, uniqueness_key, kind, payload, attempt, run_at, claimed_at, claimable, tick,
        traceparent, priority, group_key);

-- TaskFinishOn is TaskFinish for tasks of partitions on one Citus worker,
-- delegated to it (see pgsched.finish_tasks_on).
-- name: TaskFinishOn :many
SELECT (r.applied IS NOT NULL)::boolean AS summary, r.applied::bigint[] AS applied,
       coalesce(r.partition_id, 0)::integer AS partition_id, coalesce(r.id, 0)::bigint AS id,
       coalesce(r.ordering_id, '')::text AS ordering_id, coalesce(r.scheduled_at, 'epoch')::timestamptz AS scheduled_at,
       coalesce(r.uniqueness_key, '')::text AS uniqueness_key, coalesce(r.kind, '')::text AS kind,
       coalesce(r.payload, 'null')::jsonb AS payload, coalesce(r.attempt, 0)::integer AS attempt,
       coalesce(r.run_at, 'epoch')::timestamptz AS run_at, coalesce(r.claimed_at, 'epoch')::timestamptz AS claimed_at,
       coalesce(r.claimable, 0)::integer AS claimable, coalesce(r.tick, false)::boolean AS tick,
       coalesce(r.traceparent, '')::text AS traceparent, coalesce(r.priority, 0)::integer AS priority,
       coalesce(r.group_key, '')::text AS group_key
FROM pgsched.finish_tasks_on(
    sqlc.arg(anchor)::integer,
    sqlc.arg(node_id)::text,
    sqlc.arg(epoch)::bigint,
    sqlc.arg(partition_ids)::integer[],
    sqlc.arg(ordering_ids)::text[],
    sqlc.arg(task_ids)::bigint[],
    sqlc.arg(claimed_ats)::timestamptz[],
    sqlc.arg(outcomes)::text[],
    sqlc.arg(retry_delays)::float8[],
    sqlc.arg(errors)::text[],
    sqlc.arg(chain_max)::integer,
    sqlc.arg(chain_partitions)::integer[],
    sqlc.arg(chain_limit)::integer
) AS r(applied, partition_id, id, ordering_id, scheduled_at, uniqueness_key, kind, payload, attempt, run_at, claimed_at, claimable, tick,
        traceparent, priority, group_key);

-- TaskHeldBy lists the tasks the database says (node_id, epoch) runs. Running
-- heads have no index (claims stay HOT updates), so this reads the heads
-- table: a node asks only after a claim or finish statement failed in a way
-- that leaves open whether it committed.
-- name: TaskHeldBy :many
SELECT h.partition_id, h.ordering_id::text AS ordering_id, h.id, h.claimed_at::timestamptz AS claimed_at
FROM pgsched.heads h
WHERE h.node_id = sqlc.arg(node_id)::text AND h.epoch = sqlc.arg(epoch)::bigint;

-- name: TaskRescueExpired :one
SELECT pgsched.rescue_expired(sqlc.narg(nodes)::text[], sqlc.arg(orphans)::boolean)::integer AS rescued;

-- QueueNextDue: see db/functions/queue_next_due.sql.
-- name: QueueNextDue :many
SELECT q.partition_id::integer AS partition_id, q.due_in::float8 AS due_in
FROM pgsched.queue_next_due(sqlc.arg(partition_ids)::integer[]) q;

-- QueueNextDueOn: QueueNextDue for partitions on one Citus worker,
-- delegated to it (see db/functions/queue_next_due_on.sql).
-- name: QueueNextDueOn :many
SELECT q.partition_id::integer AS partition_id, q.due_in::float8 AS due_in
FROM pgsched.queue_next_due_on(sqlc.arg(anchor)::integer, sqlc.arg(partition_ids)::integer[]) q;

-- PartitionRoutes maps each partition to the Citus worker its delegated
-- calls go to; no rows on one PostgreSQL (see pgsched.citus_routes).
-- name: PartitionRoutes :many
SELECT r.partition_id::integer AS partition_id, r.worker::text AS worker FROM pgsched.citus_routes() r;

-- PriorityNegativeInUse says whether a priority below 0 was ever enqueued.
-- name: PriorityNegativeInUse :one
SELECT EXISTS (SELECT 1 FROM pgsched.priority_levels l WHERE l.priority < 0)::boolean AS in_use;

-- name: SettingsGet :one
SELECT partition_count, extract(epoch FROM grace)::float8 AS grace_seconds, extract(epoch FROM completion_retention)::float8 AS retention_seconds,
       max_payload_bytes, now()::timestamptz AS db_now
FROM pgsched.settings;

-- name: CompletionEnsurePartitions :one
SELECT pgsched.ensure_completion_partitions(now(), sqlc.arg(days_ahead)::integer)::integer AS dropped;

-- TaskList lists pending and running tasks (the tasks view) that match
-- every filter given, in key order from a key onwards (keyset paging).
-- name: TaskList :many
SELECT t.id, t.ordering_id, t.scheduled_at, t.uniqueness_key, t.kind, t.payload, t.state,
       t.run_at, t.attempt, coalesce(t.last_error, '')::text AS last_error, coalesce(t.node_id, '')::text AS node_id,
       t.priority, coalesce(t.group_key, '')::text AS group_key
FROM pgsched.tasks t
WHERE (sqlc.narg(kind)::text IS NULL OR t.kind = sqlc.narg(kind)::text)
  AND (sqlc.narg(ordering_id)::text IS NULL
       OR (t.ordering_id = sqlc.narg(ordering_id)::text
           AND t.partition_id = pgsched.partition_of(sqlc.narg(ordering_id)::text, (SELECT s.partition_count FROM pgsched.settings s))))
  AND (sqlc.narg(state)::text IS NULL OR t.state = sqlc.narg(state)::text)
  AND (sqlc.narg(due_by)::timestamptz IS NULL OR t.run_at <= sqlc.narg(due_by)::timestamptz)
  AND (t.ordering_id, t.scheduled_at, t.uniqueness_key)
      > (sqlc.arg(after_ordering_id)::text, sqlc.arg(after_scheduled_at)::timestamptz, sqlc.arg(after_uniqueness_key)::text)
ORDER BY t.ordering_id, t.scheduled_at, t.uniqueness_key
LIMIT sqlc.arg(max_rows)::integer;

-- name: KindPause :one
SELECT pgsched.pause_kind(sqlc.arg(kind)::text) AS paused;

-- name: KindResume :one
SELECT pgsched.resume_kind(sqlc.arg(kind)::text) AS resumed;

-- name: KindsPaused :many
SELECT k.kind, k.paused_at FROM pgsched.paused_kinds k ORDER BY k.kind;

-- name: PauseSweep :one
SELECT pgsched.pause_sweep() AS changed;

-- name: TaskCancelRunning :one
SELECT pgsched.cancel_running(sqlc.arg(ordering_id)::text, sqlc.arg(scheduled_at)::timestamptz, sqlc.arg(uniqueness_key)::text) AS requested;

-- name: CancelRequestIDs :many
SELECT c.task_id FROM pgsched.cancel_requests c ORDER BY c.task_id;

-- name: CancelRequestsPrune :one
SELECT pgsched.cancel_requests_prune() AS pruned;

-- NotifyDue tells every node that work may have become due sooner than it
-- planned for (LISTEN on <schema>.due).
-- name: NotifyDue :exec
SELECT pg_notify('pgsched.due', '');

-- TaskOutputsRecord stores handlers' results with the completions the
-- same transaction's finish wrote (see pgsched.record_outputs).
-- name: TaskOutputsRecord :one
SELECT pgsched.record_outputs(sqlc.arg(partition_ids)::integer[], sqlc.arg(ordering_ids)::text[],
                              sqlc.arg(scheduled_ats)::timestamptz[], sqlc.arg(uniqueness_keys)::text[],
                              sqlc.arg(outputs)::jsonb[])::integer AS recorded;

-- TaskOutput is a completed task's recorded result (pgsched.task_output).
-- name: TaskOutput :one
SELECT pgsched.task_output(sqlc.arg(ordering_id)::text, sqlc.arg(scheduled_at)::timestamptz, sqlc.arg(uniqueness_key)::text) AS output;
