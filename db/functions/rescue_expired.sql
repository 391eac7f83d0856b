-- rescue_expired gives the running tasks of nodes whose lease has expired
-- (or whose row is gone) back to their ordering_ids, to run again at once.
-- With p_nodes given, only those nodes' tasks are rescued; else those of
-- every node whose row says its lease expired, and with p_orphans those of
-- every node without a live lease, rows or not. Running heads have no
-- index (a claim stays a HOT update), so this reads the heads table:
-- callers rescue nodes as they die, and sweep (p_orphans) now and then.
-- Returns the count.
CREATE OR REPLACE FUNCTION pgsched.rescue_expired(p_nodes text[] DEFAULT NULL, p_orphans boolean DEFAULT false)
RETURNS integer
LANGUAGE plpgsql
SET jit = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_material = off
AS $$
DECLARE
    cands  text[] := p_nodes;
    lost_p integer[];
    lost_o text[];
    back_p integer[];
    back_o text[];
    q      record;
    t_now  timestamptz := now();
    n integer;
    counted boolean;
    limited text[] := '{}';
    limited_groups text[] := '{}';
    -- A task of a limited kind goes back parked (pgsched.set_limit).
    v_limited text[] := ARRAY(SELECT l.kind FROM pgsched.kind_limits l);
BEGIN
    IF cands IS NULL AND NOT p_orphans THEN
        SELECT coalesce(array_agg(nd.node_id), '{}') INTO cands FROM pgsched.nodes nd WHERE nd.lease_expires_at < now();
    END IF;
    IF cardinality(cands) = 0 THEN
        RETURN 0;
    END IF;

    SELECT array_agg(h.partition_id), array_agg(h.ordering_id)
    INTO lost_p, lost_o
    FROM pgsched.heads h
    LEFT JOIN pgsched.nodes nd ON nd.node_id = h.node_id AND nd.epoch = h.epoch
    WHERE h.running AND (cands IS NULL OR h.node_id = ANY (cands))
      AND (nd.node_id IS NULL OR nd.lease_expires_at < now());
    IF lost_p IS NULL THEN
        RETURN 0;
    END IF;

    PERFORM pgsched.lock_heads(lost_p, lost_o);

    -- Partition by partition (rare work; on Citus each statement is then
    -- routed to the worker holding the partition).
    back_p := '{}';
    back_o := '{}';
    counted := EXISTS (SELECT 1 FROM pgsched.limit_usage);
    FOR q IN SELECT x.p, array_agg(x.o) AS o FROM unnest(lost_p, lost_o) AS x(p, o) GROUP BY x.p ORDER BY x.p LOOP
        IF counted THEN
            -- Tasks a limit counts (chain -2; the rows are locked, and an
            -- expired lease is never renewed, so these are the rows the
            -- UPDATE below changes).
            SELECT limited || coalesce(array_agg(h.kind), '{}'), limited_groups || coalesce(array_agg(coalesce(h.group_key, '')), '{}')
            INTO limited, limited_groups
            FROM unnest(q.o) AS b(o) JOIN pgsched.heads h ON h.partition_id = q.p AND h.ordering_id = b.o
            WHERE h.running AND h.chain = -2
              AND NOT EXISTS (SELECT 1 FROM pgsched.nodes live
                              WHERE live.node_id = h.node_id AND live.epoch = h.epoch AND live.lease_expires_at >= t_now);
        END IF;
        WITH back AS (
            UPDATE pgsched.heads h
            -- Concatenated, not format(): Citus refuses a STABLE function
            -- over a column in an UPDATE.
            SET running = false, last_error = 'node ' || h.node_id || ' (epoch ' || h.epoch::text || ') lost its lease while running this task',
                node_id = NULL, epoch = NULL, claimed_at = NULL, chain = CASE WHEN h.kind = ANY (v_limited) THEN -1 ELSE 0 END
            FROM unnest(q.o) AS b(o)
            WHERE h.partition_id = q.p AND h.ordering_id = b.o AND h.running
              AND NOT EXISTS (SELECT 1 FROM pgsched.nodes x WHERE x.node_id = h.node_id AND x.epoch = h.epoch AND x.lease_expires_at >= t_now)
            RETURNING h.partition_id, h.ordering_id
        )
        SELECT back_p || coalesce(array_agg(back.partition_id), '{}'), back_o || coalesce(array_agg(back.ordering_id), '{}')
        INTO back_p, back_o FROM back;
    END LOOP;
    PERFORM pgsched.limit_release(nullif(limited, '{}'), limited_groups);
    lost_p := nullif(back_p, '{}');
    lost_o := nullif(back_o, '{}');
    n := coalesce(cardinality(lost_p), 0);
    IF n = 0 THEN
        RETURN 0;
    END IF;

    PERFORM pgsched.settle_heads(lost_p, lost_o);
    PERFORM pg_notify('pgsched.due', '');
    RETURN n;
END
$$;
