-- delete_dead deletes one dead task for good; returns 1, or 0 when there is
-- no dead task with that id.
CREATE OR REPLACE FUNCTION pgsched.delete_dead(id bigint)
RETURNS integer
LANGUAGE sql AS $$
    WITH gone AS (DELETE FROM pgsched.dead_tasks d WHERE d.id = delete_dead.id RETURNING 1)
    SELECT count(*)::integer FROM gone
$$;
