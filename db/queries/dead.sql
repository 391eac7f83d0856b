-- name: DeadRetry :one
SELECT pgsched.retry_dead(sqlc.arg(id)::bigint)::integer AS retried;

-- name: DeadRetryWhere :one
SELECT pgsched.retry_dead_where(sqlc.narg(kind)::text, sqlc.narg(ordering_id)::text,
                                sqlc.narg(died_after)::timestamptz, sqlc.narg(died_before)::timestamptz)::integer AS retried;

-- name: DeadDelete :one
SELECT pgsched.delete_dead(sqlc.arg(id)::bigint)::integer AS deleted;

-- name: DeadDeleteWhere :one
SELECT pgsched.delete_dead_where(sqlc.narg(kind)::text, sqlc.narg(ordering_id)::text,
                                 sqlc.narg(died_after)::timestamptz, sqlc.narg(died_before)::timestamptz)::integer AS deleted;
