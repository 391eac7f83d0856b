-- Operators pause a kind (pgsched.pause_kind): a paused kind is a row, so it
-- survives restarts and every node sees it. Its idle heads are marked
-- paused, which takes them out of the claim index, so claims do not scan
-- past them however many wait (see pause_kind and pause_sweep).

-- +goose Up
CREATE TABLE pgsched.paused_kinds (
    kind      text PRIMARY KEY,
    paused_at timestamptz NOT NULL DEFAULT now(),
    CHECK (octet_length(kind) BETWEEN 1 AND 255)
);

ALTER TABLE pgsched.heads ADD COLUMN paused boolean NOT NULL DEFAULT false;
ALTER TABLE pgsched.heads ADD CONSTRAINT heads_paused_idle CHECK (NOT (paused AND running));
DROP INDEX pgsched.heads_due;
CREATE INDEX heads_due ON pgsched.heads (partition_id, run_at) WHERE chain = 0 AND NOT paused;
-- Resuming finds a kind's paused heads without scanning the rest.
CREATE INDEX heads_paused ON pgsched.heads (kind) WHERE paused;

-- +goose Down
DROP INDEX pgsched.heads_paused;
DROP INDEX pgsched.heads_due;
CREATE INDEX heads_due ON pgsched.heads (partition_id, run_at) WHERE chain = 0;
ALTER TABLE pgsched.heads DROP CONSTRAINT heads_paused_idle;
ALTER TABLE pgsched.heads DROP COLUMN paused;
DROP TABLE pgsched.paused_kinds;
