-- A rate per group: with per_group, max_starts per per bounds each group
-- (group_key) of a kind apart, as max_running already did ("each customer
-- at most 10 calls a second"); either bound, or both, may be set.
-- limit_group_usage keeps each group's starts of the last window, as
-- limit_usage keeps the kind's.

-- +goose Up
ALTER TABLE pgsched.limit_group_usage ADD COLUMN starts timestamptz[] NOT NULL DEFAULT '{}';
ALTER TABLE pgsched.kind_limits DROP CONSTRAINT kind_limits_check2;

-- +goose Down
-- A per-group limit with a rate becomes a limit of the kind as a whole:
-- stricter, never looser, than what was asked.
UPDATE pgsched.kind_limits SET per_group = false WHERE per_group AND (max_running IS NULL OR max_starts IS NOT NULL);
ALTER TABLE pgsched.kind_limits ADD CONSTRAINT kind_limits_check2
    CHECK (NOT per_group OR (max_running IS NOT NULL AND max_starts IS NULL));
ALTER TABLE pgsched.limit_group_usage DROP COLUMN starts;
