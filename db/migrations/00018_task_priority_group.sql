-- Priority and group. A task's priority (default 0, higher first) orders
-- the due heads a claim takes; its group_key (NULL: none) names who the
-- task is for, such as a tenant, for limits and fair share. Both stay
-- with the task as it moves (backlog to head, head to dead_tasks).
--
-- The claim index is split by priority, so every pass of a claim is an
-- index range scan of one priority's due heads: heads_due keeps the
-- default priority's heads (the claim without priorities in use scans it
-- as before; its entries are the same size), heads_due_prio the others by
-- (partition, priority, run_at). A head is in one of the two, so a task
-- with a priority costs no more index writes than one without, and a
-- claim for priority 0 never steps over a million waiting heads of
-- priority -1, nor the other way round (docs/design.md, "Priorities").
--
-- priority_levels lists every non-zero priority ever enqueued, so a claim
-- asks once which priorities to look for and skips the whole question
-- when the table is empty: enqueueing at priority 0 never writes it.
-- Rows are not removed (removing one races with an enqueue of that
-- priority); an operator may delete a level no pending task has.

-- +goose Up
ALTER TABLE pgsched.heads ADD COLUMN priority integer NOT NULL DEFAULT 0;
ALTER TABLE pgsched.heads ADD COLUMN group_key text;
ALTER TABLE pgsched.backlog ADD COLUMN priority integer NOT NULL DEFAULT 0;
ALTER TABLE pgsched.backlog ADD COLUMN group_key text;
ALTER TABLE pgsched.dead_tasks ADD COLUMN priority integer NOT NULL DEFAULT 0;
ALTER TABLE pgsched.dead_tasks ADD COLUMN group_key text;
ALTER TABLE pgsched.heads ADD CONSTRAINT heads_group_key CHECK (octet_length(group_key) BETWEEN 1 AND 255);
ALTER TABLE pgsched.backlog ADD CONSTRAINT backlog_group_key CHECK (octet_length(group_key) BETWEEN 1 AND 255);

CREATE TABLE pgsched.priority_levels (
    priority integer PRIMARY KEY,
    CHECK (priority <> 0)
);

DROP INDEX pgsched.heads_due;
CREATE INDEX heads_due ON pgsched.heads (partition_id, run_at) WHERE chain = 0 AND NOT paused AND priority = 0;
CREATE INDEX heads_due_prio ON pgsched.heads (partition_id, priority, run_at) WHERE chain = 0 AND NOT paused AND priority <> 0;

-- +goose Down
DROP INDEX pgsched.heads_due_prio;
DROP INDEX pgsched.heads_due;
CREATE INDEX heads_due ON pgsched.heads (partition_id, run_at) WHERE chain = 0 AND NOT paused;
DROP TABLE pgsched.priority_levels;
ALTER TABLE pgsched.backlog DROP CONSTRAINT backlog_group_key;
ALTER TABLE pgsched.heads DROP CONSTRAINT heads_group_key;
ALTER TABLE pgsched.dead_tasks DROP COLUMN group_key;
ALTER TABLE pgsched.dead_tasks DROP COLUMN priority;
ALTER TABLE pgsched.backlog DROP COLUMN group_key;
ALTER TABLE pgsched.backlog DROP COLUMN priority;
ALTER TABLE pgsched.heads DROP COLUMN group_key;
ALTER TABLE pgsched.heads DROP COLUMN priority;
