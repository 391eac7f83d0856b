-- limit_release counts out of limit_usage the tasks of the given kinds
-- (one element per task) that stopped running under a limit: finished,
-- given back or rescued. Usage rows are locked in kind order, as claims
-- lock them, so the two cannot deadlock. The freed room may let a task of
-- the kind start on any node: it notifies them as new due work does.
-- Returns how many it counted out.
CREATE OR REPLACE FUNCTION pgsched.limit_release(p_kinds text[])
RETURNS integer
LANGUAGE plpgsql
SET jit = off
AS $$
DECLARE
    n integer := coalesce(cardinality(p_kinds), 0);
BEGIN
    IF n = 0 THEN
        RETURN 0;
    END IF;
    PERFORM 1 FROM pgsched.limit_usage x WHERE x.kind = ANY (p_kinds) ORDER BY x.kind FOR UPDATE;
    UPDATE pgsched.limit_usage x SET running = x.running - d.n
    FROM (SELECT k, count(*)::integer AS n FROM unnest(p_kinds) AS k GROUP BY k) d
    WHERE x.kind = d.k;
    PERFORM pg_notify('pgsched.due', '');
    RETURN n;
END
$$;
