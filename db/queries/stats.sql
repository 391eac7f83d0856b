-- The console's history and counts (db/migrations/00009_console_stats.sql).

-- StatsAdd adds a node's outcomes and start lateness since its last call
-- to the current minute's row.
-- name: StatsAdd :exec
INSERT INTO pgsched.stats_minutes AS s (minute, node_id, completed, retried, dead, snoozed, started, lateness_sum, lateness_max)
VALUES (date_trunc('minute', now()), sqlc.arg(node_id)::text, sqlc.arg(completed)::bigint, sqlc.arg(retried)::bigint,
        sqlc.arg(dead)::bigint, sqlc.arg(snoozed)::bigint, sqlc.arg(started)::bigint, sqlc.arg(lateness_sum)::float8,
        sqlc.arg(lateness_max)::float8)
ON CONFLICT (minute, node_id) DO UPDATE
SET completed = s.completed + excluded.completed, retried = s.retried + excluded.retried, dead = s.dead + excluded.dead,
    snoozed = s.snoozed + excluded.snoozed,
    started = s.started + excluded.started, lateness_sum = s.lateness_sum + excluded.lateness_sum,
    lateness_max = greatest(s.lateness_max, excluded.lateness_max);

-- StatsPrune drops the minutes older than a day.
-- name: StatsPrune :execrows
DELETE FROM pgsched.stats_minutes m WHERE m.minute < now() - interval '1 day';

-- name: CountKinds :one
SELECT pgsched.count_kinds() AS kinds;

-- KindsCounted is the leader's last count per kind (the per-kind gauges),
-- with how long the oldest due task had waited, in seconds, 0 when none
-- was due.
-- name: KindsCounted :many
SELECT c.kind, c.pending, c.due, c.running, c.dead,
       coalesce(extract(epoch FROM (SELECT k.counted_at FROM pgsched.kind_counted k) - c.oldest_due_at), 0)::float8 AS oldest_due_seconds,
       c.held
FROM pgsched.kind_counts c
ORDER BY c.kind;

-- StatsHour is the throughput view's last hour, oldest first, with the
-- database's clock.
-- name: StatsHour :many
SELECT t.minute::timestamptz AS minute, t.completed::bigint AS completed, t.retried::bigint AS retried, t.dead::bigint AS dead,
       t.snoozed::bigint AS snoozed, t.started::bigint AS started, coalesce(t.lateness_mean_seconds, 0)::float8 AS lateness_mean,
       coalesce(t.lateness_max_seconds, 0)::float8 AS lateness_max, now()::timestamptz AS db_now
FROM pgsched.throughput t
WHERE t.minute > date_trunc('minute', now()) - interval '60 minutes'
ORDER BY t.minute;
