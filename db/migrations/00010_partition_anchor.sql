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

-- A schema distributed over Citus already gets the table distributed here,
-- before the functions that read it are replaced on the workers (the
-- migrator's citus_distribute would do it only after them).
-- +goose StatementBegin
DO $$
BEGIN
    -- Separate checks: Citus's catalog exists only with the extension.
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        IF EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'pgsched.heads'::regclass) THEN
            PERFORM create_distributed_table('pgsched.partition_anchor', 'partition_id', colocate_with => 'pgsched.heads');
            PERFORM truncate_local_data_after_distributing_table('pgsched.partition_anchor');
        END IF;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE pgsched.partition_anchor;
