-- Recurring schedules (pgsched.recurring_upsert): each tick is an ordinary
-- task of the schedule's kind whose ordering_id is the schedule's name and
-- whose uniqueness_key is the tick's time, so ticks of one schedule run in
-- order and never overlap. The cluster's leader materializes ticks a little
-- ahead (pgsched.recurring_materialize), advancing next_tick by compare-
-- and-set, so each tick is created once whichever node does it.

-- +goose Up
CREATE TABLE pgsched.recurring_schedules (
    name       text PRIMARY KEY,
    spec       text        NOT NULL,
    time_zone  text        NOT NULL DEFAULT 'UTC',
    kind       text        NOT NULL DEFAULT 'default',
    payload    jsonb       NOT NULL DEFAULT '{}',
    missed     text        NOT NULL DEFAULT 'one',
    paused     boolean     NOT NULL DEFAULT false,
    -- The first tick not yet materialized; NULL: the next after now.
    next_tick  timestamptz,
    -- The last tick materialized, and when.
    last_tick  timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CHECK (octet_length(name) BETWEEN 1 AND 255),
    CHECK (missed IN ('skip', 'one', 'all')),
    CHECK (octet_length(kind) BETWEEN 1 AND 255)
);

-- The leader's round reads only schedules with a tick due soon.
CREATE INDEX recurring_schedules_next ON pgsched.recurring_schedules (next_tick NULLS FIRST) WHERE NOT paused;

-- +goose Down
DROP TABLE pgsched.recurring_schedules;
