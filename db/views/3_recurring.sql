-- recurring: every recurring schedule, its next tick (the earliest pending,
-- else the next the leader will create), how its last tick ended, and, for
-- a schedule whose ticks the leader cannot create, since when (set aside)
-- and why (error); recurring_upsert or recurring_resume takes it back.
-- Each schedule's ticks are looked up by recurring_ticks, a probe per task
-- table in its partition (Citus plans no lateral join from a reference
-- table into the task tables, so this one form serves both).
CREATE OR REPLACE VIEW pgsched.recurring AS
SELECT r.name, r.spec, r.time_zone, r.kind, r.missed, r.paused,
       coalesce(t.next_at, CASE WHEN NOT r.paused THEN r.next_tick END) AS next_run_at,
       t.last_at AS last_run_at, t.last_result,
       r.failing_since, r.last_error AS error,
       r.payload, r.created_at, r.updated_at
FROM pgsched.recurring_schedules r
CROSS JOIN LATERAL pgsched.recurring_ticks(r.name) t;
