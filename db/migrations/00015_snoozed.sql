-- The throughput history counts snoozes too: runs whose handler said "not
-- yet" (pgsched.Snooze, a webhook's Retry-After), which used no attempt
-- and are neither completions nor failures.

-- +goose Up
ALTER TABLE pgsched.stats_minutes ADD COLUMN snoozed bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE pgsched.stats_minutes DROP COLUMN snoozed;
