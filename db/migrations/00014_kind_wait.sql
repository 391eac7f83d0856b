-- The leader's count per kind also records the time the oldest due task
-- of the kind was due (pending, run_at in the past, as a head or in the
-- backlog): how long the kind's work waits past its time, which a queue
-- depth alone does not say. NULL when nothing of the kind is due.

-- +goose Up
ALTER TABLE pgsched.kind_counts ADD COLUMN oldest_due_at timestamptz;

-- +goose Down
ALTER TABLE pgsched.kind_counts DROP COLUMN oldest_due_at;
