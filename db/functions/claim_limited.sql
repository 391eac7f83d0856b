-- claim_limited is claim_due_many while some kind has a limit (see
-- migration 00019): first the parked heads of limited kinds, as their
-- limits allow (claim_limited_kind, kinds in name order, so claims lock
-- usage rows in one order); then the other due heads, as claim_due_many
-- takes them, parking every head of a limited kind the scan meets (chain
-- -1, out of the index it scans) instead of running it; then, if it
-- parked any, the limited kinds again, which may now take those.
--
-- It holds the limits lock shared, so a clear_limit waits for it to
-- commit before it unparks the kind's heads, and a claim that starts
-- later sees the limit gone and parks none.
CREATE OR REPLACE FUNCTION pgsched.claim_limited(p_node_id text, p_epoch bigint, p_partitions integer[], p_max integer,
                                      p_horizon timestamptz, p_paused text[])
RETURNS SETOF pgsched.heads
LANGUAGE plpgsql
SET jit = off
SET enable_seqscan = off
SET enable_bitmapscan = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    p       integer;
    left_   integer := p_max;
    got     integer;
    parked  integer := 0;
    lim     pgsched.kind_limits;
    limited text[];
    pass    integer;
    want    integer;
    todo    integer[];
    taken   pgsched.heads[];
    n_parked integer;
    n_seen  integer;
    t_now   timestamptz := now();
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtext('pgsched.kind_limits'));
    SELECT coalesce(array_agg(l.kind), '{}') INTO limited FROM pgsched.kind_limits l;
    FOR pass IN 1..2 LOOP
        EXIT WHEN pass = 2 AND parked = 0;
        FOR lim IN SELECT l.* FROM pgsched.kind_limits l WHERE l.kind <> ALL (p_paused) ORDER BY l.kind LOOP
            EXIT WHEN left_ <= 0;
            RETURN QUERY SELECT * FROM pgsched.claim_limited_kind(p_node_id, p_epoch, p_partitions, left_, p_horizon, lim);
            GET DIAGNOSTICS got = ROW_COUNT;
            left_ := left_ - got;
        END LOOP;
        EXIT WHEN pass = 2;
        -- The partitions due may be due for parked heads alone: one
        -- statement finds those with heads to claim or park, so the loop
        -- below runs a statement only where there is work.
        SELECT coalesce(array_agg(x.p ORDER BY x.i), '{}') INTO todo
        FROM unnest(p_partitions) WITH ORDINALITY AS x(p, i)
        WHERE EXISTS (SELECT 1 FROM pgsched.heads h
                      WHERE h.partition_id = x.p AND h.chain = 0 AND NOT h.paused AND NOT h.running AND h.run_at <= p_horizon);
        FOREACH p IN ARRAY todo LOOP
            LOOP
                EXIT WHEN left_ <= 0;
                want := left_;
                WITH q AS (
                    SELECT h.ctid AS tid FROM pgsched.heads h
                    WHERE h.partition_id = p AND h.chain = 0 AND NOT h.paused AND NOT h.running AND h.run_at <= p_horizon
                      AND h.kind <> ALL (p_paused)
                      AND EXISTS (SELECT 1 FROM pgsched.nodes n
                                  WHERE n.node_id = p_node_id AND n.epoch = p_epoch AND n.lease_expires_at > now()
                                    AND n.timeline IN (0, pgsched.timeline()))
                    ORDER BY h.run_at
                    LIMIT want
                    FOR UPDATE SKIP LOCKED
                ), u AS (
                    UPDATE pgsched.heads h
                    SET running = h.kind <> ALL (limited),
                        chain = CASE WHEN h.kind = ANY (limited) THEN -1 ELSE 0 END,
                        node_id = CASE WHEN h.kind <> ALL (limited) THEN p_node_id END,
                        epoch = CASE WHEN h.kind <> ALL (limited) THEN p_epoch END,
                        attempt = h.attempt + (h.kind <> ALL (limited))::integer,
                        claimed_at = CASE WHEN h.kind <> ALL (limited) THEN t_now END
                    WHERE h.partition_id = p AND h.ctid = ANY (ARRAY(SELECT q.tid FROM q)) AND NOT h.running
                    RETURNING h.*
                )
                SELECT coalesce(array_agg(u::pgsched.heads) FILTER (WHERE u.running), '{}'), count(*) FILTER (WHERE NOT u.running), count(*)
                INTO taken, n_parked, n_seen FROM u;
                RETURN QUERY SELECT * FROM unnest(taken);
                left_ := left_ - cardinality(taken);
                parked := parked + n_parked;
                -- Heads parked took places in the LIMIT without being
                -- claimed: while they filled it, the partition may hold
                -- more due heads.
                -- Parking is bounded per call, so a first claim after a
                -- limit is set does not park a whole backlog in one
                -- transaction; the next claims park the rest.
                EXIT WHEN n_parked = 0 OR n_seen < want OR parked >= 10000;
            END LOOP;
        END LOOP;
    END LOOP;
END
$$;
