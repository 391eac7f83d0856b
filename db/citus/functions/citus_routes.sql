-- citus_routes maps each partition to the Citus worker holding it, for a
-- node to send its delegated calls there (see claim_due_on). No rows on one
-- PostgreSQL, and none while the calls are not delegated (a schema not yet
-- migrated by this version): the node then calls the functions on the
-- coordinator as before.
CREATE OR REPLACE FUNCTION pgsched.citus_routes()
RETURNS TABLE (partition_id integer, worker text)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    IF (SELECT count(*) FROM pg_dist_object o JOIN pg_proc p ON o.classid = 'pg_proc'::regclass AND o.objid = p.oid
        JOIN pg_namespace ns ON ns.oid = p.pronamespace
        WHERE ns.nspname = split_part('pgsched.citus_routes', '.', 1) AND o.distribution_argument_index IS NOT NULL
          AND p.proname IN ('claim_due_on', 'finish_tasks_on', 'queue_next_due_on')) < 3 THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT c.partition_id, c.worker FROM pgsched.citus_partitions() c;
END
$$;
