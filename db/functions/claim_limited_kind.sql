-- claim_limited_kind claims, for claim_limited, up to p_max parked heads
-- (chain -1) of one limited kind from the given partitions, in the order
-- given, as many as the kind's limit has room for, and counts them in
-- limit_usage: running, and for a rate their start, the database's clock
-- when the room was granted (also their claimed_at). The usage row stays
-- locked until the claim commits, so claims of the kind on every node take
-- turns and none sees room another has taken; a kind at its limit is seen
-- so without a lock. Claimed heads keep chain -1, which tells their finish
-- to count them out again.
CREATE OR REPLACE FUNCTION pgsched.claim_limited_kind(p_node_id text, p_epoch bigint, p_partitions integer[], p_max integer,
                                           p_horizon timestamptz, p_limit pgsched.kind_limits)
RETURNS SETOF pgsched.heads
LANGUAGE plpgsql
SET jit = off
SET enable_seqscan = off
SET enable_bitmapscan = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    p       integer;
    got     integer;
    took    integer := 0;
    room    integer;
    u       pgsched.limit_usage;
    t_grant timestamptz;
BEGIN
    SELECT * INTO u FROM pgsched.limit_usage x WHERE x.kind = p_limit.kind;
    IF NOT FOUND THEN
        INSERT INTO pgsched.limit_usage (kind) VALUES (p_limit.kind) ON CONFLICT (kind) DO NOTHING;
    ELSIF pgsched.limit_room(p_limit, u, clock_timestamp()) <= 0 THEN
        RETURN;
    END IF;
    SELECT * INTO u FROM pgsched.limit_usage x WHERE x.kind = p_limit.kind FOR UPDATE;
    t_grant := clock_timestamp();
    room := least(p_max, pgsched.limit_room(p_limit, u, t_grant));
    FOREACH p IN ARRAY coalesce(p_partitions, '{}') LOOP
        EXIT WHEN took >= room;
        RETURN QUERY
        WITH q AS (
            SELECT h.ctid AS tid FROM pgsched.heads h
            WHERE h.partition_id = p AND h.chain = -1 AND NOT h.paused AND h.kind = p_limit.kind
              AND NOT h.running AND h.run_at <= p_horizon
              AND EXISTS (SELECT 1 FROM pgsched.nodes n
                          WHERE n.node_id = p_node_id AND n.epoch = p_epoch AND n.lease_expires_at > now()
                            AND n.timeline IN (0, pgsched.timeline()))
            ORDER BY h.run_at
            LIMIT room - took
            FOR UPDATE SKIP LOCKED
        )
        UPDATE pgsched.heads h
        SET running = true, node_id = p_node_id, epoch = p_epoch, attempt = h.attempt + 1, claimed_at = t_grant
        WHERE h.partition_id = p AND h.ctid = ANY (ARRAY(SELECT q.tid FROM q)) AND NOT h.running
        RETURNING h.*;
        GET DIAGNOSTICS got = ROW_COUNT;
        took := took + got;
    END LOOP;
    IF took > 0 THEN
        UPDATE pgsched.limit_usage x
        SET running = x.running + took,
            starts = CASE WHEN p_limit.max_starts IS NULL THEN '{}'
                          ELSE ARRAY(SELECT s FROM unnest(x.starts) s WHERE s > t_grant - p_limit.per ORDER BY s)
                               || array_fill(t_grant, ARRAY[took]) END
        WHERE x.kind = p_limit.kind;
    END IF;
END
$$;
