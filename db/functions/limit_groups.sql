-- limit_groups is fair share for claim_limited_kind: the groups
-- (group_key; '' for tasks without one) of a limited kind that have parked
-- heads due by p_horizon in the given partitions, in turn: from the first
-- after p_after (the group the last claim of the kind served last) on,
-- wrapping around to the start, at most p_max of them, and at most 1000
-- groups looked at; with a per-group limit (p_limit.per_group), none
-- without room at p_at (limit_group_room; one index probe each,
-- heads_limited_group). So a
-- group's backlog, however long, takes its turn with the others', and a
-- claim with room for one task serves the next group each time.
CREATE OR REPLACE FUNCTION pgsched.limit_groups(p_kind text, p_after text, p_partitions integer[], p_horizon timestamptz,
                                     p_max integer, p_limit pgsched.kind_limits DEFAULT NULL,
                                     p_at timestamptz DEFAULT NULL)
RETURNS text[]
LANGUAGE plpgsql
STABLE
SET jit = off
SET enable_seqscan = off
SET enable_bitmapscan = off
AS $$
DECLARE
    groups  text[] := '{}';
    cur     text := p_after;
    nxt     text;
    wrapped boolean := false;
    looked  integer := 0;
    -- Every priority a parked head may have: a group's due check is one
    -- index range per priority (heads_limited_group).
    levels  integer[] := ARRAY(SELECT l.priority FROM pgsched.priority_levels l) || 0;
BEGIN
    LOOP
        EXIT WHEN cardinality(groups) >= p_max OR looked >= 1000;
        -- Two statements, not "cur IS NULL OR ... > cur": a generic plan
        -- can seek heads_limited_group past cur only with the bound alone,
        -- and otherwise reads every parked head of the kind.
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
        -- A probe per level (LIMIT 1 in a LATERAL): written as a nested
        -- EXISTS, the planner made it a semi-join reading every due head
        -- of the group.
        IF EXISTS (SELECT 1 FROM unnest(levels) AS lv
                   CROSS JOIN LATERAL (SELECT 1 FROM pgsched.heads h
                                       WHERE h.chain = -1 AND NOT h.paused AND h.kind = p_kind AND coalesce(h.group_key, '') = nxt
                                         AND h.priority = lv AND h.run_at <= p_horizon AND h.partition_id = ANY (p_partitions)
                                         AND NOT h.running
                                       LIMIT 1) x)
           AND NOT (coalesce(p_limit.per_group, false)
                    AND EXISTS (SELECT 1 FROM pgsched.limit_group_usage g
                                WHERE g.kind = p_kind AND g.group_key = nxt AND pgsched.limit_group_room(p_limit, g, p_at) <= 0)) THEN
            groups := groups || nxt;
        END IF;
        cur := nxt;
    END LOOP;
    RETURN groups;
END
$$;
