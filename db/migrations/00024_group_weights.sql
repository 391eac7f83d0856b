-- Weighted fair share (pgsched.set_group_weight): a group (group_key, ''
-- for tasks without one) of a limited kind with weight w takes w turns in
-- each round of its kind's groups, where every other group takes one
-- (limit_groups, claim_limited_kind). A group without a row has weight 1.
--
-- limit_usage.last_turns is how many turns in a row the group the kind's
-- last claim served last (last_group) has had in the current round, so a
-- group of weight 3 gets its three turns even when each claim has room
-- for one task (the room a finish frees).

-- +goose Up
CREATE TABLE pgsched.limit_group_weights (
    kind       text NOT NULL,
    group_key  text NOT NULL,
    weight     integer NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, group_key),
    CHECK (octet_length(kind) BETWEEN 1 AND 255),
    CHECK (octet_length(group_key) <= 255),
    CHECK (weight BETWEEN 2 AND 1000)
);
ALTER TABLE pgsched.limit_usage ADD COLUMN last_turns integer NOT NULL DEFAULT 1;

-- +goose Down
ALTER TABLE pgsched.limit_usage DROP COLUMN last_turns;
DROP TABLE pgsched.limit_group_weights;
