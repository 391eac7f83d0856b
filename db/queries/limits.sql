-- Limits per kind (pgsched.set_limit, clear_limit and the limits view).

-- name: LimitSet :one
SELECT pgsched.set_limit(sqlc.arg(kind)::text, max_running => sqlc.narg(max_running)::integer,
                         max_starts => sqlc.narg(max_starts)::integer, per => sqlc.narg(per)::interval,
                         per_group => sqlc.arg(per_group)::boolean) AS fresh;

-- name: LimitClear :one
SELECT pgsched.clear_limit(sqlc.arg(kind)::text) AS cleared;

-- name: LimitSweep :one
SELECT pgsched.limit_sweep() AS changed;

-- name: LimitsList :many
SELECT l.kind, l.max_running, l.running::integer AS running, l.max_starts,
       coalesce(extract(epoch FROM l.per), 0)::float8 AS per_seconds, l.started_in_window::integer AS started_in_window,
       l.waiting::bigint AS waiting, l.paused::boolean AS paused, l.updated_at, l.per_group::boolean AS per_group
FROM pgsched.limits l
ORDER BY l.kind;

-- Weighted fair share (pgsched.set_group_weight and the group_weights view).

-- name: GroupWeightSet :one
SELECT pgsched.set_group_weight(sqlc.arg(kind)::text, sqlc.arg(group_key)::text, sqlc.arg(weight)::integer)::integer AS previous;

-- name: GroupWeightsList :many
SELECT w.kind, w.group_key, w.weight::integer AS weight, w.limited::boolean AS limited, w.updated_at
FROM pgsched.group_weights w
ORDER BY w.kind, w.group_key;
