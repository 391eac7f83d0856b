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
-- Priorities: with none but the default in use (priority_levels empty)
-- the claim is one pass over the partitions, on heads_due. Otherwise it
-- makes one pass per priority, highest first, each an index range scan
-- of that priority's due heads (heads_due for 0, heads_due_prio for the
-- others), and moves to a lower priority only when the higher one ran dry
-- in every partition. The passes for priorities above 0 also look in
-- p_served (the node's other partitions, which the caller did not know to
-- be due), so a task enqueued with a priority is found by the next claim;
-- lower ones wait until the caller knows their partitions are due. Each
-- non-zero priority in use costs an index probe per partition (in one
-- statement that finds where the priority has due heads). With
-- p_min_priority, lower priorities are left alone (on Citus, the claim
-- takes every worker's non-negative ones first: see internal/store).
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
-- A generic plan cannot tell that priority = lv implies heads_due_prio's
-- predicate: the second statement says priority <> 0 as well.
-- While a kind has a limit (pgsched.set_limit), its parked heads are
-- claimed first, as the limit allows (claim_limited_kind), and the
-- statements below skip the kind like a paused one; with no limit this
-- costs one look at an empty table per call.
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
    limited boolean := false;
    t_now   timestamptz := now();
    v_tl    integer := pgsched.timeline();
BEGIN
    SELECT coalesce(array_agg(k.kind), '{}'), (SELECT array_agg(l.priority ORDER BY l.priority DESC) FROM pgsched.priority_levels l)
    INTO v_paused, v_levels FROM pgsched.paused_kinds k;
    IF v_levels IS NOT NULL THEN
        v_levels := ARRAY(SELECT x FROM unnest(v_levels || 0) AS x ORDER BY x DESC);
    END IF;
    IF EXISTS (SELECT 1 FROM pgsched.kind_limits) THEN
        -- From every partition the node serves (the due read names one).
        RETURN QUERY SELECT * FROM pgsched.claim_limited(p_node_id, p_epoch, p_partitions || coalesce(p_served, '{}'), left_,
                                                         p_ahead_seconds);
        GET DIAGNOSTICS got = ROW_COUNT;
        left_ := left_ - got;
        v_paused := v_paused || ARRAY(SELECT l.kind FROM pgsched.kind_limits l);
        limited := true;
    END IF;
    FOREACH lv IN ARRAY coalesce(v_levels, '{0}') LOOP
        EXIT WHEN left_ <= 0 OR lv < p_min_priority;
        parts := coalesce(p_partitions, '{}');
        IF lv > 0 THEN
            parts := parts || ARRAY(SELECT x FROM unnest(p_served) AS x WHERE x <> ALL (parts));
        END IF;
        IF lv <> 0 THEN
            -- One statement (an index probe per partition) finds where this
            -- priority has due heads, so the locking statements below run
            -- only there: a priority in use but rarely due costs a claim
            -- little.
            parts := ARRAY(SELECT x.p FROM unnest(parts) WITH ORDINALITY AS x(p, i)
                           CROSS JOIN LATERAL (SELECT 1 FROM pgsched.heads h
                                               WHERE h.partition_id = x.p AND h.chain = 0 AND NOT h.paused AND h.priority <> 0
                                                 AND h.priority = lv AND NOT h.running AND h.run_at <= horizon
                                               LIMIT 1) d
                           ORDER BY x.i);
        ELSIF limited THEN
            -- While a kind has a limit, partitions are also due for its
            -- parked heads, taken above: the same one statement keeps the
            -- locking statements to where there is other work.
            -- A probe per partition (LIMIT 1 in a LATERAL, here and above):
            -- as an EXISTS the planner could make it a semi-join that reads
            -- every due head (TestClaimCostIndependentOfBacklog).
            parts := ARRAY(SELECT x.p FROM unnest(parts) WITH ORDINALITY AS x(p, i)
                           CROSS JOIN LATERAL (SELECT 1 FROM pgsched.heads h
                                               WHERE h.partition_id = x.p AND h.chain = 0 AND NOT h.paused AND h.priority = 0
                                                 AND NOT h.running AND h.run_at <= horizon AND h.kind <> ALL (v_paused)
                                               LIMIT 1) d
                           ORDER BY x.i);
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
                                    AND n.timeline IN (0, v_tl))
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
                                    AND n.timeline IN (0, v_tl))
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
