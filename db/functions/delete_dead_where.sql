-- delete_dead_where deletes every dead task the filters select (see
-- dead_ids) in one statement and returns how many.
CREATE OR REPLACE FUNCTION pgsched.delete_dead_where(kind text DEFAULT NULL, ordering_id text DEFAULT NULL,
                                                     died_after timestamptz DEFAULT NULL, died_before timestamptz DEFAULT NULL)
RETURNS integer
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM pgsched.dead_tasks d
        -- Qualified: unqualified, kind and ordering_id would name d's columns.
        WHERE d.id = ANY (pgsched.dead_ids(delete_dead_where.kind, delete_dead_where.ordering_id,
                                           delete_dead_where.died_after, delete_dead_where.died_before))
        RETURNING 1
    )
    SELECT count(*)::integer FROM gone
$$;
