-- A successor finish_tasks hands over, as it returns it: only the columns
-- a node runs a task with. finish_tasks gathers the successors its first
-- statement hands over before it can return them; as whole heads rows
-- (26 columns, with the known successors' tid and id arrays) every one was
-- built, copied and taken apart again for columns nobody reads.

-- +goose Up
CREATE TYPE pgsched.handed AS (
    partition_id   integer,
    id             bigint,
    ordering_id    text,
    scheduled_at   timestamptz,
    uniqueness_key text,
    kind           text,
    payload        jsonb,
    attempt        integer,
    run_at         timestamptz,
    claimed_at     timestamptz,
    tick           boolean,
    traceparent    text,
    priority       integer,
    group_key      text
);

-- +goose Down
DROP TYPE pgsched.handed;
