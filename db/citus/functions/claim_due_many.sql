-- claim_due_many on Citus: what db/functions/claim_due_many.sql does on
-- one server (see there), but for priorities other than 0 it does not
-- first look in one statement where each has due heads (a subquery per
-- element of a list of partitions is refused by Citus, and a statement
-- over several partitions spans shards): each pass runs its locking
-- statement in every partition.
CREATE OR REPLACE FUNCTION pgsched.claim_due_many(p_node_id text, p_epoch bigint, p_partitions integer[], p_max integer,
                                       p_ahead_seconds float8 DEFAULT 0, p_served integer[] DEFAULT NULL,
                                       p_min_priority integer DEFAULT NULL)
RETURNS SETOF pgsched.heads
LANGUAGE plpgsql
SET jit = off
SET enable_seqscan = off
SET enable_bitmapscan = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    p       integer;
    lv      integer;
    parts   integer[];
    left_   integer := p_max;
    got     integer;
    horizon timestamptz := now() + make_interval(secs => greatest(p_ahead_seconds, 0));
    v_paused text[];
    v_levels integer[];
    t_now   timestamptz := now();
BEGIN
    SELECT coalesce(array_agg(k.kind), '{}'), (SELECT array_agg(l.priority ORDER BY l.priority DESC) FROM pgsched.priority_levels l)
    INTO v_paused, v_levels FROM pgsched.paused_kinds k;
    -- Limited kinds are claimed on the coordinator (claim_limited), which
    -- counts what runs under a limit; here they are skipped like paused ones.
    v_paused := v_paused || ARRAY(SELECT l.kind FROM pgsched.kind_limits l);
    IF v_levels IS NOT NULL THEN
        v_levels := ARRAY(SELECT x FROM unnest(v_levels || 0) AS x ORDER BY x DESC);
    END IF;
    FOREACH lv IN ARRAY coalesce(v_levels, '{0}') LOOP
        EXIT WHEN left_ <= 0 OR lv < p_min_priority;
        parts := coalesce(p_partitions, '{}');
        IF lv > 0 THEN
            parts := parts || ARRAY(SELECT x FROM unnest(p_served) AS x WHERE x <> ALL (parts));
        END IF;
        FOREACH p IN ARRAY parts LOOP
            EXIT WHEN left_ <= 0;
            IF lv = 0 THEN
                RETURN QUERY
                WITH q AS (
                    SELECT h.ctid AS tid FROM pgsched.heads h
                    WHERE h.partition_id = p AND h.chain = 0 AND NOT h.paused AND h.priority = 0 AND NOT h.running
                      AND h.run_at <= horizon AND h.kind <> ALL (v_paused)
                      AND EXISTS (SELECT 1 FROM pgsched.nodes n
                                  WHERE n.node_id = p_node_id AND n.epoch = p_epoch AND n.lease_expires_at > now()
                                    AND n.timeline IN (0, pgsched.timeline()))
                    ORDER BY h.run_at
                    LIMIT left_
                    FOR UPDATE SKIP LOCKED
                )
                UPDATE pgsched.heads h
                SET running = true, node_id = p_node_id, epoch = p_epoch, attempt = h.attempt + 1, claimed_at = t_now
                WHERE h.partition_id = p AND h.ctid = ANY (ARRAY(SELECT q.tid FROM q)) AND NOT h.running
                RETURNING h.*;
            ELSE
                RETURN QUERY
                WITH q AS (
                    SELECT h.ctid AS tid FROM pgsched.heads h
                    WHERE h.partition_id = p AND h.chain = 0 AND NOT h.paused AND h.priority <> 0 AND h.priority = lv
                      AND NOT h.running AND h.run_at <= horizon AND h.kind <> ALL (v_paused)
                      AND EXISTS (SELECT 1 FROM pgsched.nodes n
                                  WHERE n.node_id = p_node_id AND n.epoch = p_epoch AND n.lease_expires_at > now()
                                    AND n.timeline IN (0, pgsched.timeline()))
                    ORDER BY h.run_at
                    LIMIT left_
                    FOR UPDATE SKIP LOCKED
                )
                UPDATE pgsched.heads h
                SET running = true, node_id = p_node_id, epoch = p_epoch, attempt = h.attempt + 1, claimed_at = t_now
                WHERE h.partition_id = p AND h.ctid = ANY (ARRAY(SELECT q.tid FROM q)) AND NOT h.running
                RETURNING h.*;
            END IF;
            GET DIAGNOSTICS got = ROW_COUNT;
            left_ := left_ - got;
        END LOOP;
    END LOOP;
END
$$;
