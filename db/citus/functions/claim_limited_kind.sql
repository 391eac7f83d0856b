-- claim_limited_kind on Citus: what db/functions/claim_limited_kind.sql
-- does on one server (priorities, groups in turn with their weights, the
-- kind's and each group's room), run on the coordinator (claim_limited),
-- with two differences Citus imposes:
--
-- - What runs under the limit is counted in heads itself (its running
--   heads of chain -2, one statement over every shard), not kept in
--   limit_usage.running: a finish runs delegated on the Citus worker that
--   holds its partition, where it cannot write a reference table. So a
--   finished, given-back or rescued task stops counting as its head
--   changes, in the same transaction.
-- - Citus refuses a locking statement over several partitions: the heads
--   to claim are chosen by reading (per priority and group, earliest
--   first), then claimed partition by partition, each an UPDATE of the
--   chosen ones still parked.
--
-- Each statement over the shards costs a query per shard, so the claim
-- makes few: one reads the earliest and latest due group, and when they
-- are one group (a kind without group keys, or one tenant due here) and
-- neither a per-group limit nor weights apply, that group is the turn
-- order, without limit_groups' scan. One connection per Citus worker runs
-- a statement's shard queries one after another
-- (citus.max_adaptive_executor_pool_size): each takes less than opening a
-- connection, which Citus does per transaction beyond the one it keeps.
--
-- Claims of the kind take turns on its limit_usage row, written (so locked
-- on every copy of the reference table) before anything is counted: a
-- claim counts only after the one before it has committed on every Citus
-- worker, so none sees room another has taken.
CREATE OR REPLACE FUNCTION pgsched.claim_limited_kind(p_node_id text, p_epoch bigint, p_partitions integer[], p_max integer,
                                           p_horizon timestamptz, p_limit pgsched.kind_limits)
RETURNS SETOF pgsched.heads
LANGUAGE plpgsql
SET jit = off
SET citus.max_adaptive_executor_pool_size = 1
AS $$
DECLARE
    u       pgsched.limit_usage;
    t_grant timestamptz;
    t_now   timestamptz := now();
    room    integer;
    left_   integer;
    groups  text[];
    rooms   integer[];
    weights integer[];
    offs    integer[];
    lv      integer;
    i       integer;
    r       record;
    hr      pgsched.heads;
    c_p integer[]; c_o text[]; c_i integer[]; c_rn integer[];
    s_p integer[]; s_o text[]; s_i integer[]; s_t integer[];
    taken   pgsched.heads[] := '{}';
    got     pgsched.heads[];
    last_i  integer;
    last_t  integer;
    t_cut   timestamptz;
    g_lo    text;
    g_hi    text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pgsched.nodes n
                   WHERE n.node_id = p_node_id AND n.epoch = p_epoch AND n.lease_expires_at > t_now
                     AND n.timeline IN (0, pgsched.timeline())) THEN
        RETURN;
    END IF;
    -- Every claim of the node comes here while a kind has a limit: one
    -- statement over the shards says whether the kind has work due in
    -- these partitions at all, and in which groups (the first and last).
    SELECT min(coalesce(h.group_key, '')), max(coalesce(h.group_key, '')) INTO g_lo, g_hi FROM pgsched.heads h
    WHERE h.chain = -1 AND NOT h.paused AND h.kind = p_limit.kind AND h.partition_id = ANY (p_partitions) AND NOT h.running
      AND h.run_at <= p_horizon;
    IF g_lo IS NULL THEN
        RETURN;
    END IF;
    -- A kind at its limit is seen so without the write below.
    SELECT x.* INTO u FROM pgsched.limit_usage x WHERE x.kind = p_limit.kind;
    IF NOT FOUND THEN
        INSERT INTO pgsched.limit_usage (kind) VALUES (p_limit.kind) ON CONFLICT (kind) DO NOTHING;
    ELSE
        IF p_limit.max_running IS NOT NULL AND NOT p_limit.per_group THEN
            SELECT count(*)::integer INTO u.running FROM pgsched.heads h WHERE h.chain = -2 AND h.running AND h.kind = p_limit.kind;
        END IF;
        IF pgsched.limit_room(p_limit, u, clock_timestamp()) <= 0 THEN
            RETURN;
        END IF;
    END IF;
    UPDATE pgsched.limit_usage x SET last_turns = x.last_turns WHERE x.kind = p_limit.kind RETURNING x.* INTO u;
    IF p_limit.max_running IS NOT NULL AND NOT p_limit.per_group THEN
        SELECT count(*)::integer INTO u.running FROM pgsched.heads h WHERE h.chain = -2 AND h.running AND h.kind = p_limit.kind;
    END IF;
    t_grant := clock_timestamp();
    -- Computed apart: Citus refuses a STABLE expression over a column in
    -- a distributed write.
    t_cut := t_grant - p_limit.per;
    room := least(p_max, pgsched.limit_room(p_limit, u, t_grant));
    IF room <= 0 THEN
        RETURN;
    END IF;
    SELECT t.groups, t.weights, t.offs INTO groups, weights, offs
    FROM pgsched.limit_turns(p_limit, u, p_partitions, p_horizon, room, t_grant, CASE WHEN g_lo = g_hi THEN g_lo END) t;
    IF cardinality(groups) = 0 THEN
        RETURN;
    END IF;
    IF p_limit.per_group THEN
        rooms := '{}';
        FOR i IN 1 .. cardinality(groups) LOOP
            rooms := rooms || greatest(pgsched.limit_group_room(p_limit, (
                SELECT ROW(p_limit.kind, groups[i], (SELECT count(*)::integer FROM pgsched.heads h
                                                     WHERE h.chain = -2 AND h.running AND h.kind = p_limit.kind
                                                       AND coalesce(h.group_key, '') = groups[i]),
                           coalesce((SELECT g.starts FROM pgsched.limit_group_usage g
                                     WHERE g.kind = p_limit.kind AND g.group_key = groups[i]), '{}'))::pgsched.limit_group_usage),
                t_grant), 0);
        END LOOP;
    ELSE
        rooms := array_fill(room, ARRAY[cardinality(groups)]);
    END IF;
    left_ := room;
    FOREACH lv IN ARRAY ARRAY(SELECT x FROM unnest(ARRAY(SELECT l.priority FROM pgsched.priority_levels l) || 0) AS x
                              ORDER BY x DESC) LOOP
        EXIT WHEN left_ <= 0;
        -- Each group's earliest parked heads of this priority, read.
        c_p := '{}'; c_o := '{}'; c_i := '{}'; c_rn := '{}';
        FOR i IN 1 .. cardinality(groups) LOOP
            CONTINUE WHEN rooms[i] <= 0;
            FOR r IN SELECT h.partition_id, h.ordering_id FROM pgsched.heads h
                     WHERE h.chain = -1 AND NOT h.paused AND h.kind = p_limit.kind AND coalesce(h.group_key, '') = groups[i]
                       AND h.priority = lv AND h.partition_id = ANY (p_partitions) AND NOT h.running AND h.run_at <= p_horizon
                     ORDER BY h.run_at LIMIT least(left_, rooms[i]) LOOP
                c_p := c_p || r.partition_id; c_o := c_o || r.ordering_id::text; c_i := c_i || i;
                c_rn := c_rn || (cardinality(c_i) - coalesce(array_position(c_i, i), 1) + 1);
            END LOOP;
        END LOOP;
        CONTINUE WHEN cardinality(c_p) = 0;
        -- In rounds (rnd: the round of a group's rn-th head, w a round),
        -- as many as there is room for.
        SELECT array_agg(q.p ORDER BY q.rnd, q.i, q.rn), array_agg(q.o ORDER BY q.rnd, q.i, q.rn),
               array_agg(q.i ORDER BY q.rnd, q.i, q.rn), array_agg(q.turn ORDER BY q.rnd, q.i, q.rn)
        INTO s_p, s_o, s_i, s_t
        FROM (SELECT c.p, c.o, c.i, c.rn, (c.rn + offs[c.i] - 1) / weights[c.i] + 1 AS rnd, (c.rn + offs[c.i] - 1) % weights[c.i] + 1 AS turn
              FROM unnest(c_p, c_o, c_i, c_rn) AS c(p, o, i, rn)
              ORDER BY 5, 3, 4 LIMIT left_) q;
        -- Claimed partition by partition, those still parked.
        got := '{}';
        FOR r IN SELECT x.p, array_agg(x.o) AS o FROM unnest(s_p, s_o) AS x(p, o) GROUP BY x.p ORDER BY x.p LOOP
            FOR hr IN
                UPDATE pgsched.heads h
                SET running = true, node_id = p_node_id, epoch = p_epoch, attempt = h.attempt + 1, claimed_at = t_grant, chain = -2
                WHERE h.partition_id = r.p AND h.ordering_id = ANY (r.o) AND h.chain = -1 AND NOT h.running AND NOT h.paused
                  AND EXISTS (SELECT 1 FROM pgsched.nodes n
                              WHERE n.node_id = p_node_id AND n.epoch = p_epoch AND n.lease_expires_at > t_now)
                RETURNING h.*
            LOOP
                got := got || hr;
            END LOOP;
        END LOOP;
        CONTINUE WHEN cardinality(got) = 0;
        -- The group served last and its turns this round.
        SELECT s_i[x.j], s_t[x.j] INTO last_i, last_t
        FROM generate_subscripts(s_p, 1) AS x(j)
        WHERE EXISTS (SELECT 1 FROM unnest(got) g WHERE g.partition_id = s_p[x.j] AND g.ordering_id = s_o[x.j])
        ORDER BY x.j DESC LIMIT 1;
        taken := taken || got;
        left_ := left_ - cardinality(got);
        rooms := ARRAY(SELECT greatest(x.r - (SELECT count(*) FROM unnest(got) t WHERE coalesce(t.group_key, '') = x.gk)::integer, 0)
                       FROM unnest(groups, rooms) WITH ORDINALITY AS x(gk, r, i) ORDER BY x.i);
    END LOOP;
    IF cardinality(taken) = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM unnest(taken);
    IF p_limit.max_starts IS NOT NULL AND p_limit.per_group THEN
        INSERT INTO pgsched.limit_group_usage (kind, group_key)
        SELECT DISTINCT p_limit.kind, coalesce(t.group_key, '') FROM unnest(taken) t ON CONFLICT DO NOTHING;
        UPDATE pgsched.limit_group_usage g
        SET starts = ARRAY(SELECT s FROM unnest(g.starts) s WHERE s > t_cut ORDER BY s)
                     || array_fill(t_grant, ARRAY[d.n])
        FROM (SELECT coalesce(t.group_key, '') AS gk, count(*)::integer AS n FROM unnest(taken) t GROUP BY 1) d
        WHERE g.kind = p_limit.kind AND g.group_key = d.gk;
    END IF;
    UPDATE pgsched.limit_usage x
    SET last_group = coalesce(groups[last_i], x.last_group),
        last_turns = coalesce(last_t, 1),
        starts = CASE WHEN p_limit.max_starts IS NULL OR p_limit.per_group THEN '{}'
                      ELSE ARRAY(SELECT s FROM unnest(x.starts) s WHERE s > t_cut ORDER BY s)
                           || array_fill(t_grant, ARRAY[cardinality(taken)]) END
    WHERE x.kind = p_limit.kind;
END
$$;
