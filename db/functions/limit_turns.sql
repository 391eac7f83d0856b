-- limit_turns is the order in which a claim of a limited kind serves the
-- kind's groups (fair share), as both forms of claim_limited_kind take it:
-- the groups with a parked head due by p_horizon in p_partitions
-- (limit_groups, at most p_max of them), starting after the group the
-- kind's last claim served last (p_usage.last_group), or at that group
-- again while it has turns left of its weight (set_group_weight); each
-- group's weight (1 unless set), and the turns it has had already this
-- round (only the first can have any). p_one, when not NULL, is the only
-- group the caller found due: without a per-group limit or weights it is
-- the order, and no scan is made.
CREATE OR REPLACE FUNCTION pgsched.limit_turns(p_limit pgsched.kind_limits, p_usage pgsched.limit_usage,
                                    p_partitions integer[], p_horizon timestamptz, p_max integer,
                                    p_at timestamptz, p_one text DEFAULT NULL,
                                    OUT groups text[], OUT weights integer[], OUT offs integer[])
LANGUAGE plpgsql
STABLE
SET jit = off
AS $$
DECLARE
    weighted boolean := EXISTS (SELECT 1 FROM pgsched.limit_group_weights w WHERE w.kind = p_limit.kind);
    cont     boolean := false;
    v_after  text := p_usage.last_group;
BEGIN
    IF p_one IS NOT NULL AND NOT p_limit.per_group AND NOT weighted THEN
        groups := ARRAY[p_one];
    ELSE
        IF weighted THEN
            cont := p_usage.last_turns < coalesce((SELECT w.weight FROM pgsched.limit_group_weights w
                                                   WHERE w.kind = p_limit.kind AND w.group_key = p_usage.last_group), 1);
        END IF;
        IF cont THEN
            -- The group before it, so that limit_groups starts at it (none
            -- before: from the first).
            SELECT coalesce(h.group_key, '') INTO v_after FROM pgsched.heads h
            WHERE h.chain = -1 AND NOT h.paused AND h.kind = p_limit.kind AND coalesce(h.group_key, '') < p_usage.last_group
            ORDER BY coalesce(h.group_key, '') DESC LIMIT 1;
            IF NOT FOUND THEN
                v_after := NULL;
            END IF;
        END IF;
        groups := pgsched.limit_groups(p_limit.kind, v_after, p_partitions, p_horizon, p_max, p_limit, p_at);
    END IF;
    IF weighted THEN
        weights := ARRAY(SELECT coalesce((SELECT w.weight FROM pgsched.limit_group_weights w
                                          WHERE w.kind = p_limit.kind AND w.group_key = x.gk), 1)
                         FROM unnest(groups) WITH ORDINALITY AS x(gk, i) ORDER BY x.i);
        offs := ARRAY(SELECT CASE WHEN x.i = 1 AND cont AND x.gk = p_usage.last_group THEN p_usage.last_turns ELSE 0 END
                      FROM unnest(groups) WITH ORDINALITY AS x(gk, i) ORDER BY x.i);
    ELSE
        weights := array_fill(1, ARRAY[cardinality(groups)]);
        offs := array_fill(0, ARRAY[cardinality(groups)]);
    END IF;
END
$$;
