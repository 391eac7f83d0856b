-- recurring: every recurring schedule, its next tick (the earliest pending,
-- else the next the leader will create), how its last tick ended, and, for
-- a schedule whose ticks the leader cannot create, since when (set aside)
-- and why (error); recurring_upsert or recurring_resume takes it back.
-- not on citus: begin
CREATE OR REPLACE VIEW pgsched.recurring AS
SELECT r.name, r.spec, r.time_zone, r.kind, r.missed, r.paused,
       coalesce(nx.at, CASE WHEN NOT r.paused THEN r.next_tick END) AS next_run_at,
       last.at AS last_run_at, last.result AS last_result,
       r.failing_since, r.last_error AS error,
       r.payload, r.created_at, r.updated_at
FROM pgsched.recurring_schedules r
CROSS JOIN LATERAL (SELECT pgsched.partition_of(r.name, s.partition_count) AS p FROM pgsched.settings s) part
LEFT JOIN LATERAL (
    SELECT min(t.scheduled_at) AS at FROM (
        SELECT h.scheduled_at FROM pgsched.heads h
        WHERE h.partition_id = part.p AND h.ordering_id = r.name AND h.uniqueness_key LIKE 'tick %'
        UNION ALL
        SELECT b.scheduled_at FROM pgsched.backlog b
        WHERE b.partition_id = part.p AND b.ordering_id = r.name AND b.uniqueness_key LIKE 'tick %'
    ) t
) nx ON true
LEFT JOIN LATERAL (
    SELECT x.at, x.result FROM (
        (SELECT c.completed_at AS at, 'completed'::text AS result FROM pgsched.completions c
         WHERE c.partition_id = part.p AND c.ordering_id = r.name AND c.uniqueness_key LIKE 'tick %'
         ORDER BY c.completed_at DESC LIMIT 1)
        UNION ALL
        (SELECT d.died_at, 'dead' FROM pgsched.dead_tasks d
         WHERE d.partition_id = part.p AND d.ordering_id = r.name AND d.uniqueness_key LIKE 'tick %'
         ORDER BY d.died_at DESC LIMIT 1)
    ) x ORDER BY x.at DESC LIMIT 1
) last ON true;
-- not on citus: end
/*citus -- Citus plans no lateral join from a reference table into the task
-- tables: a function looks each schedule's ticks up, one routed probe per
-- table.
CREATE OR REPLACE VIEW pgsched.recurring AS
SELECT r.name, r.spec, r.time_zone, r.kind, r.missed, r.paused,
       coalesce(t.next_at, CASE WHEN NOT r.paused THEN r.next_tick END) AS next_run_at,
       t.last_at AS last_run_at, t.last_result,
       r.failing_since, r.last_error AS error,
       r.payload, r.created_at, r.updated_at
FROM pgsched.recurring_schedules r
CROSS JOIN LATERAL pgsched.recurring_ticks(r.name) t;
*/
