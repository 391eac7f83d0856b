-- limit_release on Citus: nothing to count out. There a limit counts the
-- running tasks in heads (see Citus's claim_limited_kind), so a task stops
-- counting as its head changes; a finish delegated to a Citus worker could
-- not write the reference table limit_usage anyway. The freed room may let
-- a task of the kind start: the nodes are notified as on one server.
-- Returns how many tasks stopped running under a limit.
CREATE OR REPLACE FUNCTION pgsched.limit_release(p_kinds text[], p_groups text[] DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
AS $$
BEGIN
    IF coalesce(cardinality(p_kinds), 0) = 0 THEN
        RETURN 0;
    END IF;
    PERFORM pg_notify('pgsched.due', '');
    RETURN cardinality(p_kinds);
END
$$;
