-- limit_groups on Citus: what db/functions/limit_groups.sql does on one
-- server (see there), with a group's due check one statement, not a probe
-- per priority (Citus refuses a LATERAL subquery with LIMIT over unnest),
-- and a per-group limit's running tasks counted in heads (see Citus's
-- claim_limited_kind), not in limit_group_usage.
CREATE OR REPLACE FUNCTION pgsched.limit_groups(p_kind text, p_after text, p_partitions integer[], p_horizon timestamptz,
                                     p_max integer, p_limit pgsched.kind_limits DEFAULT NULL,
                                     p_at timestamptz DEFAULT NULL)
RETURNS text[]
LANGUAGE plpgsql
STABLE
SET jit = off
AS $$
DECLARE
    groups  text[] := '{}';
    cur     text := p_after;
    nxt     text;
    wrapped boolean := false;
    looked  integer := 0;
    n       integer;
BEGIN
    LOOP
        EXIT WHEN cardinality(groups) >= p_max OR looked >= 1000;
        IF cur IS NULL THEN
            SELECT coalesce(h.group_key, '') INTO nxt FROM pgsched.heads h
            WHERE h.chain = -1 AND NOT h.paused AND h.kind = p_kind
            ORDER BY coalesce(h.group_key, '') LIMIT 1;
        ELSE
            SELECT coalesce(h.group_key, '') INTO nxt FROM pgsched.heads h
            WHERE h.chain = -1 AND NOT h.paused AND h.kind = p_kind AND coalesce(h.group_key, '') > cur
            ORDER BY coalesce(h.group_key, '') LIMIT 1;
        END IF;
        IF NOT FOUND THEN
            EXIT WHEN wrapped OR p_after IS NULL;
            wrapped := true;
            cur := NULL;
            CONTINUE;
        END IF;
        EXIT WHEN wrapped AND nxt > p_after;
        looked := looked + 1;
        cur := nxt;
        PERFORM 1 FROM pgsched.heads h
        WHERE h.chain = -1 AND NOT h.paused AND h.kind = p_kind AND coalesce(h.group_key, '') = nxt
          AND h.run_at <= p_horizon AND h.partition_id = ANY (p_partitions) AND NOT h.running
        LIMIT 1;
        CONTINUE WHEN NOT FOUND;
        IF coalesce(p_limit.per_group, false) THEN
            SELECT count(*)::integer INTO n FROM pgsched.heads h
            WHERE h.chain = -2 AND h.running AND h.kind = p_kind AND coalesce(h.group_key, '') = nxt;
            CONTINUE WHEN pgsched.limit_group_room(p_limit, ROW(p_kind, nxt, n,
                coalesce((SELECT g.starts FROM pgsched.limit_group_usage g WHERE g.kind = p_kind AND g.group_key = nxt), '{}')
                )::pgsched.limit_group_usage, p_at) <= 0;
        END IF;
        groups := groups || nxt;
    END LOOP;
    RETURN groups;
END
$$;
