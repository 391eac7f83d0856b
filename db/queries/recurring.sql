-- name: RecurringUpsert :one
SELECT pgsched.recurring_upsert(sqlc.arg(name)::text, sqlc.arg(spec)::text, sqlc.arg(kind)::text, sqlc.arg(payload)::jsonb,
                                sqlc.arg(time_zone)::text, sqlc.arg(missed)::text)::text AS result;

-- name: RecurringPause :one
SELECT pgsched.recurring_pause(sqlc.arg(name)::text) AS changed;

-- name: RecurringResume :one
SELECT pgsched.recurring_resume(sqlc.arg(name)::text) AS changed;

-- name: RecurringDelete :one
SELECT pgsched.recurring_delete(sqlc.arg(name)::text) AS deleted;

-- RecurringDue lists the schedules whose next tick falls before the
-- horizon (or is not computed yet), with the database's clock.
-- name: RecurringDue :many
SELECT r.name, r.spec, r.time_zone, r.missed, r.next_tick, now()::timestamptz AS db_now
FROM pgsched.recurring_schedules r
WHERE NOT r.paused AND (r.next_tick IS NULL OR r.next_tick <= now() + make_interval(secs => sqlc.arg(horizon_seconds)::float8))
ORDER BY r.next_tick NULLS FIRST
LIMIT sqlc.arg(max_rows)::integer;

-- name: RecurringMaterialize :one
SELECT pgsched.recurring_materialize(sqlc.arg(name)::text, sqlc.narg(expected)::timestamptz, sqlc.arg(next)::timestamptz,
                                     sqlc.arg(ticks)::timestamptz[]) AS created;

-- name: RecurringList :many
SELECT r.name, r.spec, r.time_zone, r.kind, r.missed, r.paused,
       coalesce(r.next_run_at, 'epoch')::timestamptz AS next_run_at, coalesce(r.last_run_at, 'epoch')::timestamptz AS last_run_at,
       coalesce(r.last_result, '')::text AS last_result, r.payload
FROM pgsched.recurring r
ORDER BY r.name;

-- name: RecurringPausedNames :many
SELECT r.name FROM pgsched.recurring_schedules r WHERE r.paused ORDER BY r.name;
