-- delete_dead_where deletes every dead task the filters select (see
-- dead_ids) in one statement and returns how many.
CREATE OR REPLACE FUNCTION pgsched.delete_dead_where(kind text DEFAULT NULL, ordering_id text DEFAULT NULL,
                                                     died_after timestamptz DEFAULT NULL, died_before timestamptz DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    ids bigint[];
    n   integer;
BEGIN
    -- PL/pgSQL rather than SQL: Citus plans no statement of an SQL
    -- function that uses its parameters. Qualified: unqualified, kind and
    -- ordering_id would name d's columns.
    ids := pgsched.dead_ids(delete_dead_where.kind, delete_dead_where.ordering_id,
                            delete_dead_where.died_after, delete_dead_where.died_before);
    DELETE FROM pgsched.dead_tasks d WHERE d.id = ANY (ids);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
