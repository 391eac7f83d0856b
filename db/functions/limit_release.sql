-- limit_release counts out of limit_usage the tasks of the given kinds
-- (one element per task, p_groups their groups, '' for none) that stopped
-- running under a limit: finished, given back or rescued; and out of
-- limit_group_usage where a per-group limit counts them. Usage rows are
-- locked in key order, kinds then groups, as claims lock them, so the two
-- cannot deadlock. The freed room may let a task of the kind start on any
-- node: it notifies them as new due work does. Returns how many it counted
-- out.
CREATE OR REPLACE FUNCTION pgsched.limit_release(p_kinds text[], p_groups text[] DEFAULT NULL)
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
    -- Per-group counts (a per-group limit), where the kind keeps them.
    PERFORM 1 FROM pgsched.limit_group_usage g
    WHERE (g.kind, g.group_key) IN (SELECT k, gk FROM unnest(p_kinds, p_groups) AS t(k, gk))
    ORDER BY g.kind, g.group_key FOR UPDATE;
    UPDATE pgsched.limit_group_usage g SET running = g.running - d.n
    FROM (SELECT k, gk, count(*)::integer AS n FROM unnest(p_kinds, p_groups) AS t(k, gk) GROUP BY k, gk) d
    WHERE g.kind = d.k AND g.group_key = d.gk;
    PERFORM pg_notify('pgsched.due', '');
    RETURN n;
END
$$;
