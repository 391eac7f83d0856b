-- A recurring schedule whose ticks the leader cannot create (its zone does
-- not load on the leading node, its spec does not parse, schedule_many
-- refuses its kind or payload: rows written before recurring_upsert
-- checked as much, or by hand) is set aside: failing_since says since
-- when, last_error why, and the leader leaves it out of its pick of due
-- schedules until retry_at, so schedules that fail never take the turn of
-- those that work. An upsert or a resume clears the three; a retry that
-- succeeds too. See internal/recurring.

-- +goose Up
-- The constraint in a statement of its own: Citus refuses ADD CONSTRAINT
-- beside other subcommands on a distributed schema's tables.
ALTER TABLE pgsched.recurring_schedules
    ADD COLUMN failing_since timestamptz,
    ADD COLUMN last_error    text,
    ADD COLUMN retry_at      timestamptz;
ALTER TABLE pgsched.recurring_schedules ADD CONSTRAINT recurring_schedules_set_aside
    CHECK ((failing_since IS NULL) = (last_error IS NULL) AND (failing_since IS NULL) = (retry_at IS NULL));

-- The leader's pick reads the working schedules by next tick, then the set
-- aside ones due for a retry.
DROP INDEX pgsched.recurring_schedules_next;
CREATE INDEX recurring_schedules_next ON pgsched.recurring_schedules (next_tick NULLS FIRST)
    WHERE NOT paused AND failing_since IS NULL;
CREATE INDEX recurring_schedules_retry ON pgsched.recurring_schedules (retry_at)
    WHERE NOT paused AND failing_since IS NOT NULL;

-- +goose Down
DROP INDEX pgsched.recurring_schedules_retry;
DROP INDEX pgsched.recurring_schedules_next;
CREATE INDEX recurring_schedules_next ON pgsched.recurring_schedules (next_tick NULLS FIRST) WHERE NOT paused;
ALTER TABLE pgsched.recurring_schedules DROP CONSTRAINT recurring_schedules_set_aside;
ALTER TABLE pgsched.recurring_schedules
    DROP COLUMN retry_at,
    DROP COLUMN last_error,
    DROP COLUMN failing_since;
