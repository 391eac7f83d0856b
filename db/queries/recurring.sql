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
-- horizon (or is not computed yet), with the database's clock: first those
-- that work, by next tick, then those set aside whose retry is due, so a
-- pile of failing schedules never takes the turn of one that works.
-- name: RecurringDue :many
SELECT d.name, d.spec, d.time_zone, d.missed, d.next_tick, d.updated_at, d.failing_since, now()::timestamptz AS db_now
FROM (
    (SELECT r.name, r.spec, r.time_zone, r.missed, r.next_tick, r.updated_at, r.failing_since, r.retry_at
     FROM pgsched.recurring_schedules r
     WHERE NOT r.paused AND r.failing_since IS NULL
       AND (r.next_tick IS NULL OR r.next_tick <= now() + make_interval(secs => sqlc.arg(horizon_seconds)::float8))
     ORDER BY r.next_tick NULLS FIRST
     LIMIT sqlc.arg(max_rows)::integer)
    UNION ALL
    (SELECT r.name, r.spec, r.time_zone, r.missed, r.next_tick, r.updated_at, r.failing_since, r.retry_at
     FROM pgsched.recurring_schedules r
     WHERE NOT r.paused AND r.failing_since IS NOT NULL AND r.retry_at <= now()
     ORDER BY r.retry_at
     LIMIT sqlc.arg(max_rows)::integer)
) d
ORDER BY d.failing_since IS NOT NULL, d.next_tick NULLS FIRST, d.retry_at
LIMIT sqlc.arg(max_rows)::integer;

-- name: RecurringSetAside :many
SELECT a.schedule::text AS schedule, a.newly::boolean AS newly, a.retry_at::timestamptz AS retry_at
FROM pgsched.recurring_set_aside(sqlc.arg(names)::text[], sqlc.arg(updated_ats)::timestamptz[], sqlc.arg(errors)::text[],
                                 sqlc.arg(min_seconds)::float8, sqlc.arg(max_seconds)::float8) a;

-- name: RecurringSetAsideCount :one
SELECT count(*) FROM pgsched.recurring_schedules r WHERE r.failing_since IS NOT NULL;

-- name: RecurringMaterialize :one
SELECT pgsched.recurring_materialize(sqlc.arg(name)::text, sqlc.narg(expected)::timestamptz, sqlc.arg(next)::timestamptz,
                                     sqlc.arg(ticks)::timestamptz[]) AS created;

-- name: RecurringList :many
SELECT r.name, r.spec, r.time_zone, r.kind, r.missed, r.paused,
       coalesce(r.next_run_at, 'epoch')::timestamptz AS next_run_at, coalesce(r.last_run_at, 'epoch')::timestamptz AS last_run_at,
       coalesce(r.last_result, '')::text AS last_result, r.failing_since, coalesce(r.error, '')::text AS error, r.payload
FROM pgsched.recurring r
ORDER BY r.name;

-- name: RecurringPausedNames :many
SELECT r.name FROM pgsched.recurring_schedules r WHERE r.paused ORDER BY r.name;
