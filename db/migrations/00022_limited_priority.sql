-- Priorities within a limited kind: a claim of a limited kind takes its
-- parked heads a priority at a time, highest first (claim_limited_kind),
-- so the index of a kind's parked heads by group has the priority before
-- the time: each pass is a range of one group at one priority.

-- +goose Up
DROP INDEX pgsched.heads_limited_group;
CREATE INDEX heads_limited_group ON pgsched.heads (kind, (coalesce(group_key, '')), priority, run_at) WHERE chain = -1 AND NOT paused;

-- +goose Down
DROP INDEX pgsched.heads_limited_group;
CREATE INDEX heads_limited_group ON pgsched.heads (kind, (coalesce(group_key, '')), run_at) WHERE chain = -1 AND NOT paused;
