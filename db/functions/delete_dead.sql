-- delete_dead deletes one dead task for good; returns 1, or 0 when there is
-- no dead task with that id.
CREATE OR REPLACE FUNCTION pgsched.delete_dead(id bigint)
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    n integer;
BEGIN
    -- PL/pgSQL rather than SQL: Citus plans no statement of an SQL
    -- function that uses its parameters.
    DELETE FROM pgsched.dead_tasks d WHERE d.id = delete_dead.id;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
