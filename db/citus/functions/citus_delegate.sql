-- citus_delegate makes, on a schema distributed over Citus, a worker
-- node's calls run on the Citus workers: claim_due_on, finish_tasks_on and
-- queue_next_due_on become delegated functions, distributed by their
-- p_anchor partition and co-located with heads, so the coordinator sends
-- each call whole to the worker holding that partition instead of running
-- its PL/pgSQL and routing every statement itself. Every other function of
-- the schema is created on the workers too, as a delegated call needs
-- what it calls there (Citus creates a function on the workers when it is
-- created, except one that names a table not yet distributed, such as a
-- function returning heads rows created before migrate -citus distributed
-- heads).
--
-- The migrator calls it after every Up; it does nothing without Citus or
-- before the schema is distributed, and returns how many functions it
-- distributed or delegated.
CREATE OR REPLACE FUNCTION pgsched.citus_delegate()
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    s text := split_part('pgsched.citus_delegate', '.', 1);
    f regprocedure;
    n integer := 0;
BEGIN
    -- Two statements: without Citus, pg_dist_partition does not exist.
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN 0;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'pgsched.heads'::regclass) THEN
        RETURN 0;
    END IF;
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_namespace ns ON ns.oid = p.pronamespace
        WHERE ns.nspname = s
          AND NOT EXISTS (SELECT 1 FROM pg_dist_object o WHERE o.classid = 'pg_proc'::regclass AND o.objid = p.oid)
        ORDER BY p.oid
    LOOP
        PERFORM create_distributed_function(f);
        n := n + 1;
    END LOOP;
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_namespace ns ON ns.oid = p.pronamespace
        WHERE ns.nspname = s AND p.proname IN ('claim_due_on', 'finish_tasks_on', 'queue_next_due_on')
          AND NOT EXISTS (SELECT 1 FROM pg_dist_object o WHERE o.classid = 'pg_proc'::regclass AND o.objid = p.oid
                                                         AND o.distribution_argument_index IS NOT NULL)
        ORDER BY p.oid
    LOOP
        PERFORM create_distributed_function(f, 'p_anchor', colocate_with => 'pgsched.heads');
        n := n + 1;
    END LOOP;
    RETURN n;
END
$$;
