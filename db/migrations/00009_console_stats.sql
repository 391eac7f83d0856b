-- What the web console (pgschedui) and psql users read to see history and
-- counts without scanning the task tables on every look:
--
--   stats_minutes  per minute and node, the outcomes the node recorded and
--                  the start lateness of first attempts. Each node adds
--                  its counts every maintenance round (one upsert of one
--                  row), so a minute costs a node one row however many
--                  tasks it ran; the leader drops rows older than a day.
--   kind_counts    per kind, pending, due, running and dead tasks, as the
--                  leader last counted them (pgsched.count_kinds) in one
--                  snapshot; kind_counted says when and how long it took.
--
-- Counting per kind means reading every task, so it happens once for the
-- cluster every few seconds (less often when it takes long), not once per
-- page view, per node or per scrape.

-- +goose Up
CREATE TABLE pgsched.stats_minutes (
    minute       timestamptz NOT NULL,
    node_id      text        NOT NULL,
    completed    bigint      NOT NULL DEFAULT 0,
    retried      bigint      NOT NULL DEFAULT 0,
    dead         bigint      NOT NULL DEFAULT 0,
    -- first attempts started, and their start lateness in seconds
    started      bigint      NOT NULL DEFAULT 0,
    lateness_sum float8      NOT NULL DEFAULT 0,
    lateness_max float8      NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, node_id)
);

CREATE TABLE pgsched.kind_counts (
    kind    text   PRIMARY KEY,
    pending bigint NOT NULL,
    due     bigint NOT NULL,
    running bigint NOT NULL,
    dead    bigint NOT NULL
);

CREATE TABLE pgsched.kind_counted (
    one        boolean     PRIMARY KEY DEFAULT true CHECK (one),
    counted_at timestamptz NOT NULL,
    took       interval    NOT NULL
);

-- The dead page lists the newest first, of one kind or of all.
CREATE INDEX dead_tasks_died_at ON pgsched.dead_tasks (died_at);
CREATE INDEX dead_tasks_kind ON pgsched.dead_tasks (kind, died_at);
-- A task's page looks its key up among the dead too.
CREATE INDEX dead_tasks_key ON pgsched.dead_tasks (partition_id, ordering_id, scheduled_at, uniqueness_key);

-- +goose Down
DROP INDEX pgsched.dead_tasks_key;
DROP INDEX pgsched.dead_tasks_kind;
DROP INDEX pgsched.dead_tasks_died_at;
DROP TABLE pgsched.kind_counted;
DROP TABLE pgsched.kind_counts;
DROP TABLE pgsched.stats_minutes;
