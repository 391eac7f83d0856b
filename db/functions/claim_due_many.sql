-- claim_due_many claims up to p_max due idle heads from the given
-- partitions, in the order given (callers pass the most overdue first), for
-- the node (p_node_id, p_epoch) while its lease is live (and registered on
-- this server's timeline: see node_register), and returns them:
-- one transaction, so one commit (one WAL flush) however many partitions it
-- spans, and one row update per task. Heads of a paused kind are skipped
-- (see pause_kind): marked ones are not in the index the claim scans, the
-- others are filtered by kind. Each statement locks rows of one
-- partition only. With p_ahead_seconds, heads due within that much of now
-- are claimed too: the worker holds them and starts each on time, so a
-- claim's round trip and commit are not part of a task's start lateness.
--
-- Heads are locked with SKIP LOCKED in a CTE (never IN (subquery ... FOR
-- UPDATE), which can update more rows than the limit), then updated by
-- ctid, so no plan scans a partition per claimed task, even on tables
-- never analyzed. Seq scans are disabled because the planner, costing a
-- ctid fetch as a random page read, prefers scanning a small partition
-- whole to fetching 100 tuples, and bitmap scans because, on a table never
-- analyzed, it may prefer reading the partition's whole primary key to
-- the ctid fetch (a wider row, such as traceparent's, makes it guess fewer
-- rows per page, which tips it); generic plans because plpgsql would
-- otherwise re-plan the statement for every partition (on Citus, which
-- must see the partition as a value to route the statement, custom ones).
-- While any kind has a limit, claim_limited claims instead: with none,
-- this costs one look at an empty table per call.
CREATE OR REPLACE FUNCTION pgsched.claim_due_many(p_node_id text, p_epoch bigint, p_partitions integer[], p_max integer,
                                       p_ahead_seconds float8 DEFAULT 0)
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
    horizon timestamptz := now() + make_interval(secs => greatest(p_ahead_seconds, 0));
    v_paused text[];
    t_now   timestamptz := now();
BEGIN
    SELECT coalesce(array_agg(k.kind), '{}') INTO v_paused FROM pgsched.paused_kinds k;
    IF EXISTS (SELECT 1 FROM pgsched.kind_limits) THEN
        RETURN QUERY SELECT * FROM pgsched.claim_limited(p_node_id, p_epoch, p_partitions, p_max, horizon, v_paused);
        RETURN;
    END IF;
    FOREACH p IN ARRAY coalesce(p_partitions, '{}') LOOP
        EXIT WHEN left_ <= 0;
        RETURN QUERY
        WITH q AS (
            SELECT h.ctid AS tid FROM pgsched.heads h
            WHERE h.partition_id = p AND h.chain = 0 AND NOT h.paused AND NOT h.running AND h.run_at <= horizon
              AND h.kind <> ALL (v_paused)
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
        GET DIAGNOSTICS got = ROW_COUNT;
        left_ := left_ - got;
    END LOOP;
END
$$;
