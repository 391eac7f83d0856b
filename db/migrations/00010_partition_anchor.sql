-- One row per logical partition. On one PostgreSQL nothing reads it. On
-- Citus it is distributed by partition_id, co-located with the task
-- tables, and an enqueue's INSERT of a batch selects its partition's row:
-- Citus then sends the INSERT ... SELECT whole to the worker holding the
-- partition, where an INSERT selecting only from the batch's arrays is
-- run on the coordinator and its rows copied over (about three times as
-- long; docs/design.md, "Citus: what it accepts").

-- +goose Up
CREATE TABLE pgsched.partition_anchor (
    partition_id integer PRIMARY KEY
);

INSERT INTO pgsched.partition_anchor (partition_id)
SELECT generate_series(0, s.partition_count - 1) FROM pgsched.settings s;

-- +goose Down
DROP TABLE pgsched.partition_anchor;
