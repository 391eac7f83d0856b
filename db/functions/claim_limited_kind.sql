-- claim_limited_kind claims, for claim_limited, up to p_max parked heads
-- (chain -1) of one limited kind from the given partitions, highest
-- priority first, then groups in turn (a group of weight w, from
-- set_group_weight, w turns a round; the turns the group served last has
-- had carry over to the next claim), then earliest first, as many as
-- the kind's limit has room for, and counts them in
-- limit_usage: running, and for a rate their start, the database's clock
-- when the room was granted (also their claimed_at). The usage row stays
-- locked until the claim commits, so claims of the kind on every node take
-- turns and none sees room another has taken; a kind at its limit is seen
-- so without a lock. Claimed heads get chain -2: out of heads_limited_kind, so
-- no scan of parked heads wades through running ones, and marked for their
-- finish (or rescue) to count them out again.
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
    took    integer := 0;
    room    integer;
    u       pgsched.limit_usage;
    t_grant timestamptz;
    groups  text[];
    rooms   integer[];
    taken   pgsched.heads[] := '{}';
    got     pgsched.heads[];
    lv      integer;
    left_   integer;
    v_tl    integer := pgsched.timeline();
    weights integer[];
    offs    integer[];
    last_i  integer;
    last_t  integer;
    lastrow integer[];
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
    IF room <= 0 THEN
        RETURN;
    END IF;
    -- Groups in turn (limit_turns: which, their weights, where the round
    -- stands). One statement across the node's partitions (Citus's form
    -- claims partition by partition: a locking statement there must name
    -- one), updating by key: each group's earliest parked heads
    -- (heads_limited_group) in turn, a round of one each, then another,
    -- each group to its own room under a per-group bound.
    SELECT t.groups, t.weights, t.offs INTO groups, weights, offs
    FROM pgsched.limit_turns(p_limit, u, p_partitions, p_horizon, room, t_grant) t;
    IF p_limit.per_group THEN
        -- The groups' rows, locked in key order as releases lock them.
        INSERT INTO pgsched.limit_group_usage (kind, group_key)
        SELECT p_limit.kind, g FROM unnest(groups) AS g ON CONFLICT DO NOTHING;
        PERFORM 1 FROM pgsched.limit_group_usage g
        WHERE g.kind = p_limit.kind AND g.group_key = ANY (groups) ORDER BY g.group_key FOR UPDATE;
        rooms := ARRAY(SELECT greatest(pgsched.limit_group_room(p_limit, g, t_grant), 0)
                       FROM unnest(groups) WITH ORDINALITY AS x(gk, i)
                       LEFT JOIN pgsched.limit_group_usage g ON g.kind = p_limit.kind AND g.group_key = x.gk
                       ORDER BY x.i);
    ELSE
        rooms := array_fill(room, ARRAY[cardinality(groups)]);
    END IF;
    -- Higher priorities first (priority_levels, as claim_due_many), each
    -- an index range of heads_limited_group: groups in turn within a
    -- priority, each group's room shared by the passes.
    left_ := room;
    FOREACH lv IN ARRAY ARRAY(SELECT x FROM unnest(ARRAY(SELECT l.priority FROM pgsched.priority_levels l) || 0) AS x
                              ORDER BY x DESC) LOOP
        EXIT WHEN left_ <= 0;
        WITH c AS (
            -- rnd: the round of the group's rn-th head, w a round.
            SELECT t.partition_id, t.ordering_id, g.i, t.rn, (t.rn + g.o - 1) / g.w + 1 AS rnd, (t.rn + g.o - 1) % g.w + 1 AS turn
            FROM unnest(groups, rooms, weights, offs) WITH ORDINALITY AS g(gk, r, w, o, i)
            CROSS JOIN LATERAL (
                SELECT x.partition_id, x.ordering_id, row_number() OVER (ORDER BY x.run_at) AS rn
                FROM (SELECT h.partition_id, h.ordering_id, h.run_at FROM pgsched.heads h
                      WHERE h.chain = -1 AND NOT h.paused AND h.kind = p_limit.kind AND coalesce(h.group_key, '') = g.gk
                        AND h.priority = lv AND h.partition_id = ANY (p_partitions) AND NOT h.running
                        AND h.run_at <= p_horizon
                        AND EXISTS (SELECT 1 FROM pgsched.nodes n
                                    WHERE n.node_id = p_node_id AND n.epoch = p_epoch AND n.lease_expires_at > now()
                                      AND n.timeline IN (0, v_tl))
                      ORDER BY h.run_at
                      LIMIT least(left_, g.r)
                      FOR UPDATE SKIP LOCKED) x
            ) t
        ), q AS (
            SELECT c.partition_id, c.ordering_id, c.rnd, c.i, c.rn, c.turn FROM c ORDER BY c.rnd, c.i, c.rn LIMIT left_
        ), claimed AS (
            UPDATE pgsched.heads h
            SET running = true, node_id = p_node_id, epoch = p_epoch, attempt = h.attempt + 1, claimed_at = t_grant,
                chain = -2
            FROM q
            WHERE h.partition_id = q.partition_id AND h.ordering_id = q.ordering_id AND h.chain = -1 AND NOT h.running
            RETURNING h.*
        )
        SELECT coalesce(array_agg(x::pgsched.heads), '{}'),
               (SELECT ARRAY[q.i, q.turn]::integer[] FROM q ORDER BY q.rnd DESC, q.i DESC, q.rn DESC LIMIT 1)
        INTO got, lastrow FROM claimed x;
        CONTINUE WHEN cardinality(got) = 0;
        -- The group served last and its turns this round.
        last_i := lastrow[1];
        last_t := lastrow[2];
        taken := taken || got;
        left_ := left_ - cardinality(got);
        rooms := ARRAY(SELECT greatest(x.r - (SELECT count(*) FROM unnest(got) t WHERE coalesce(t.group_key, '') = x.gk)::integer, 0)
                       FROM unnest(groups, rooms) WITH ORDINALITY AS x(gk, r, i) ORDER BY x.i);
    END LOOP;
    RETURN QUERY SELECT * FROM unnest(taken);
    took := cardinality(taken);
    IF p_limit.per_group AND took > 0 THEN
        UPDATE pgsched.limit_group_usage g
        SET running = g.running + d.n,
            starts = CASE WHEN p_limit.max_starts IS NULL THEN '{}'
                          ELSE ARRAY(SELECT s FROM unnest(g.starts) s WHERE s > t_grant - p_limit.per ORDER BY s)
                               || array_fill(t_grant, ARRAY[d.n]) END
        FROM (SELECT coalesce(t.group_key, '') AS gk, count(*)::integer AS n FROM unnest(taken) t GROUP BY 1) d
        WHERE g.kind = p_limit.kind AND g.group_key = d.gk;
    END IF;
    IF took > 0 THEN
        UPDATE pgsched.limit_usage x
        SET running = x.running + took,
            last_group = coalesce(groups[last_i], x.last_group),
            last_turns = coalesce(last_t, 1),
            starts = CASE WHEN p_limit.max_starts IS NULL OR p_limit.per_group THEN '{}'
                          ELSE ARRAY(SELECT s FROM unnest(x.starts) s WHERE s > t_grant - p_limit.per ORDER BY s)
                               || array_fill(t_grant, ARRAY[took]) END
        WHERE x.kind = p_limit.kind;
    END IF;
END
$$;
