-- finish_tasks records what happened to running tasks, in one batch:
-- outcome 'completed' deletes the task and writes its tombstone, 'dead' moves
-- it to dead_tasks, 'retry' makes it pending again retry_delay seconds from
-- now (the database's now), 'release' makes it pending again as it was (a
-- graceful stop gave it back), 'snooze' pending again retry_delay seconds
-- from now without using the attempt (the handler said "not yet"). Only
-- tasks still held by the claim the outcome is for change: (node_id,
-- epoch) and the claim's claimed_at, so a stale node's or a replayed
-- statement's late writes change nothing.
-- Returns one row per successor handed straight to the node as running,
-- shaped as a claim returns it, then one row whose applied holds the ids
-- of the tasks that changed and claimable how many heads the call left for
-- a claim. Heads are changed in key order, as enqueuers lock them, so the
-- two cannot deadlock. Promotion, handing over (none below v_top, the
-- highest priority in use) and the plan: docs/design.md, "finish_tasks".
CREATE OR REPLACE FUNCTION pgsched.finish_tasks(
    p_node_id      text,
    p_epoch        bigint,
    partition_ids  integer[],
    ordering_ids   text[],
    task_ids       bigint[],
    claimed_ats    timestamptz[],
    outcomes       text[],
    retry_delays   float8[],
    errors         text[],
    p_chain        integer DEFAULT 0,
    p_chain_partitions integer[] DEFAULT NULL,
    p_chain_limit  integer DEFAULT 0
)
RETURNS TABLE (applied bigint[], partition_id integer, id bigint, ordering_id text, scheduled_at timestamptz,
               uniqueness_key text, kind text, payload jsonb, attempt integer, run_at timestamptz,
               claimed_at timestamptz, claimable integer, tick boolean, traceparent text, priority integer, group_key text)
LANGUAGE plpgsql
SET jit = off
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_material = off
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    gone_p  integer[]; gone_o text[]; gone_c integer[]; gone_id bigint[];
    back_p  integer[]; back_o text[]; back_id bigint[];
    room    integer := coalesce(p_chain, 0);
    known_n integer; moved_n integer;
    fast    pgsched.handed[];
    promoted integer := 0;
    handed  integer := 0; handed2 integer;
    v_paused text[] := '{}';
    v_top   integer := 0;
    -- now(), the transaction's start, in a variable: Citus refuses it in RETURNING and CASE.
    t_now   timestamptz := now();
    gone_lk text[]; gone_lg text[];
    v_limited text[];
    v_held  text[] := '{}';
    freed   integer := 0;
    got     integer;
BEGIN
    IF EXISTS (SELECT 1 FROM unnest(outcomes) AS x(outcome) WHERE x.outcome NOT IN ('completed', 'dead')) THEN
        PERFORM pgsched.lock_heads(partition_ids, ordering_ids);
    END IF;

    IF room > 0 AND EXISTS (SELECT 1 FROM pgsched.nodes n
                            WHERE n.node_id = p_node_id AND n.epoch = p_epoch AND n.lease_expires_at > t_now
                              AND n.timeline IN (0, pgsched.timeline())) THEN
        -- A successor of a limited kind is parked (pgsched.set_limit), not
        -- handed over; room its kind's tasks free is (finish_hand_limited).
        SELECT coalesce(array_agg(k.kind), '{}'), greatest((SELECT max(l.priority) FROM pgsched.priority_levels l), 0),
               ARRAY(SELECT l.kind FROM pgsched.kind_limits l)
        INTO v_paused, v_top, v_limited FROM pgsched.paused_kinds k;
        v_held := v_paused;
        v_paused := v_paused || v_limited;
    ELSE
        room := 0;
        v_limited := ARRAY(SELECT l.kind FROM pgsched.kind_limits l);
    END IF;

    -- Completed and dead tasks leave; where the head knew its successor
    -- (next_tids, see "Known successors"), the successor moves up in the
    -- same statement, by ctid.
    WITH gone AS (
        DELETE FROM pgsched.heads h
        USING (
            SELECT b.p, b.o COLLATE "C" AS o, b.id, b.ca, b.outcome, b.err
            FROM unnest(partition_ids, ordering_ids, task_ids, claimed_ats, outcomes, errors) AS b(p, o, id, ca, outcome, err)
            WHERE b.outcome IN ('completed', 'dead')
            ORDER BY b.p, o
        ) b
        -- Held by this node means running (CHECK on heads).
        WHERE h.partition_id = b.p AND h.ordering_id = b.o AND h.id = b.id
          AND h.node_id = p_node_id AND h.epoch = p_epoch AND h.claimed_at = b.ca
        -- What the statements below read, no more (a dead task's payload
        -- only for it): every row is kept until they are done.
        RETURNING h.partition_id, h.ordering_id, h.id, h.scheduled_at, h.uniqueness_key, h.kind, h.attempt, h.node_id,
                  h.tick, h.chain, h.backlog, h.next_tids, h.next_ids, h.next_more, h.priority, h.group_key,
                  CASE WHEN b.outcome = 'dead' THEN h.payload END AS payload,
                  CASE WHEN b.outcome = 'dead' THEN h.traceparent END AS traceparent, b.outcome, b.err
    ), known AS (
        SELECT g.partition_id AS p, g.ordering_id AS o, g.chain AS c, g.next_tids[1] AS tid, g.next_ids[1] AS id,
               g.next_tids[2:] AS rest_tids, g.next_ids[2:] AS rest_ids, g.next_more AS more_after,
               row_number() OVER () AS i
        FROM gone g WHERE g.backlog AND cardinality(g.next_tids) > 0
    ), moved AS (
        DELETE FROM pgsched.backlog b USING known k
        WHERE b.partition_id = k.p AND b.id = k.id AND b.ordering_id = k.o AND b.ctid = k.tid
        RETURNING b.*, k.rest_tids, k.rest_ids, k.more_after, k.c AS prev_chain,
                  coalesce(k.i <= room AND b.run_at <= t_now AND k.c < p_chain_limit AND b.priority >= v_top
                           AND b.partition_id = ANY (p_chain_partitions) AND b.kind <> ALL (v_paused), false) AS run
    ), tomb AS (
        INSERT INTO pgsched.completions (partition_id, ordering_id, scheduled_at, uniqueness_key, kind, attempt, node_id, completed_at,
                                         tick)
        SELECT g.partition_id, g.ordering_id, g.scheduled_at, g.uniqueness_key, g.kind, g.attempt, g.node_id, t_now, g.tick
        FROM gone g WHERE g.outcome = 'completed'
    ), dead AS (
        INSERT INTO pgsched.dead_tasks (partition_id, id, ordering_id, scheduled_at, uniqueness_key, kind, payload, attempt, last_error, node_id,
                                        tick, traceparent, priority, group_key)
        SELECT g.partition_id, g.id, g.ordering_id, g.scheduled_at, g.uniqueness_key, g.kind, g.payload, g.attempt, g.err, g.node_id, g.tick, g.traceparent, g.priority,
               g.group_key
        FROM gone g WHERE g.outcome = 'dead'
    ), ins AS (
        INSERT INTO pgsched.heads AS h (partition_id, ordering_id, scheduled_at, uniqueness_key, id, kind, payload,
                                        run_at, attempt, revision, last_error, created_at, backlog,
                                        running, node_id, epoch, claimed_at, chain, next_tids, next_ids, next_more, tick, traceparent, priority, group_key)
        SELECT m.partition_id, m.ordering_id, m.scheduled_at, m.uniqueness_key, m.id, m.kind, m.payload,
               m.run_at, m.attempt + m.run::integer, m.revision, m.last_error, m.created_at,
               cardinality(m.rest_tids) > 0 OR m.more_after,
               m.run, CASE WHEN m.run THEN p_node_id END, CASE WHEN m.run THEN p_epoch END,
               CASE WHEN m.run THEN t_now END, CASE WHEN m.run THEN greatest(m.prev_chain, 0) + 1 WHEN m.kind = ANY (v_limited) THEN -1 ELSE 0 END,
               CASE WHEN cardinality(m.rest_tids) > 0 THEN m.rest_tids END,
               CASE WHEN cardinality(m.rest_tids) > 0 THEN m.rest_ids END, m.more_after, m.tick, m.traceparent, m.priority, m.group_key
        FROM moved m
        RETURNING h.running,
                  CASE WHEN h.running THEN ROW(h.partition_id, h.id, h.ordering_id, h.scheduled_at, h.uniqueness_key, h.kind, h.payload,
                      h.attempt, h.run_at, h.claimed_at, h.tick, h.traceparent, h.priority, h.group_key)::pgsched.handed END AS x
    )
    SELECT array_agg(g.partition_id) FILTER (WHERE g.backlog AND coalesce(cardinality(g.next_tids), 0) = 0),
           array_agg(g.ordering_id) FILTER (WHERE g.backlog AND coalesce(cardinality(g.next_tids), 0) = 0),
           array_agg(g.chain) FILTER (WHERE g.backlog AND coalesce(cardinality(g.next_tids), 0) = 0),
           array_agg(g.id), count(*) FILTER (WHERE g.backlog AND cardinality(g.next_tids) > 0),
           (SELECT count(*) FROM ins), (SELECT array_agg(i.x) FROM ins i WHERE i.running),
           array_agg(g.kind) FILTER (WHERE g.chain = -2), array_agg(coalesce(g.group_key, '')) FILTER (WHERE g.chain = -2)
    INTO gone_p, gone_o, gone_c, gone_id, known_n, moved_n, fast, gone_lk, gone_lg FROM gone g;
    IF fast IS NOT NULL THEN
        RETURN QUERY
        SELECT NULL::bigint[], x.partition_id, x.id, x.ordering_id::text, x.scheduled_at, x.uniqueness_key::text,
               x.kind, x.payload, x.attempt, x.run_at, x.claimed_at, NULL::integer, x.tick, x.traceparent, x.priority, x.group_key
        FROM unnest(fast) x;
        handed := cardinality(fast);
    END IF;
    promoted := moved_n;

    IF gone_p IS NOT NULL THEN
        -- The others' next task, by (scheduled_at, id), in a statement of
        -- its own, whose fresh snapshot (taken with the heads deleted, so
        -- locked) sees every task enqueued before; the next 8 become the
        -- new head's known successors (docs/design.md, "finish_tasks").
        RETURN QUERY
        WITH pick AS (
            SELECT k.p, k.o, k.c, k.i, coalesce(t.tid, f.tids[1]) AS tid, coalesce(t.id, f.ids[1]) AS bid, f.n > 1 AS more,
                   CASE WHEN f.n > 1 AND f.nd = f.n THEN f.tids[2:9] END AS next_tids,
                   CASE WHEN f.n > 1 AND f.nd = f.n THEN f.ids[2:9] END AS next_ids,
                   f.n = 10 AS next_more
            FROM unnest(gone_p, gone_o, gone_c) WITH ORDINALITY AS k(p, o, c, i)
            CROSS JOIN LATERAL (
                SELECT array_agg(x.tid ORDER BY x.scheduled_at, x.uniqueness_key) AS tids,
                       array_agg(x.id ORDER BY x.scheduled_at, x.uniqueness_key) AS ids,
                       min(x.scheduled_at) AS sa1, count(*) AS n, count(DISTINCT x.scheduled_at) AS nd
                FROM (
                    SELECT b.ctid AS tid, b.id, b.scheduled_at, b.uniqueness_key FROM pgsched.backlog b
                    WHERE b.partition_id = k.p AND b.ordering_id = k.o
                    ORDER BY b.scheduled_at, b.uniqueness_key LIMIT 10
                ) x
            ) f
            LEFT JOIN LATERAL (
                SELECT b.ctid AS tid, b.id FROM pgsched.backlog b
                WHERE f.n > 1 AND f.nd < f.n
                  AND b.partition_id = k.p AND b.ordering_id = k.o AND b.scheduled_at = f.sa1
                ORDER BY b.id LIMIT 1
            ) t ON true
        ), moved AS (
            DELETE FROM pgsched.backlog b USING pick
            WHERE b.partition_id = pick.p AND b.ctid = pick.tid
            RETURNING b.*, pick.more, pick.next_tids, pick.next_ids, pick.next_more, pick.c AS prev_chain,
                      coalesce(pick.i + known_n <= room AND b.run_at <= t_now AND pick.c < p_chain_limit AND b.priority >= v_top
                               AND b.partition_id = ANY (p_chain_partitions) AND b.kind <> ALL (v_paused), false) AS run
        ), ins AS (
            INSERT INTO pgsched.heads AS h (partition_id, ordering_id, scheduled_at, uniqueness_key, id, kind, payload,
                                            run_at, attempt, revision, last_error, created_at, backlog,
                                            running, node_id, epoch, claimed_at, chain, next_tids, next_ids, next_more, tick, traceparent, priority, group_key)
            SELECT m.partition_id, m.ordering_id, m.scheduled_at, m.uniqueness_key, m.id, m.kind, m.payload,
                   m.run_at, m.attempt + m.run::integer, m.revision, m.last_error, m.created_at, m.more,
                   m.run, CASE WHEN m.run THEN p_node_id END, CASE WHEN m.run THEN p_epoch END,
                   CASE WHEN m.run THEN t_now END, CASE WHEN m.run THEN greatest(m.prev_chain, 0) + 1 WHEN m.kind = ANY (v_limited) THEN -1 ELSE 0 END,
                   m.next_tids, m.next_ids, m.next_more, m.tick, m.traceparent, m.priority, m.group_key
            FROM moved m
            RETURNING h.partition_id, h.id, h.ordering_id, h.scheduled_at, h.uniqueness_key, h.kind, h.payload,
                      h.attempt, h.run_at, h.claimed_at, h.running, h.tick, h.traceparent, h.priority, h.group_key
        )
        SELECT NULL::bigint[], x.partition_id, x.id, x.ordering_id::text, x.scheduled_at, x.uniqueness_key::text,
               x.kind, x.payload, x.attempt, x.run_at, x.claimed_at, NULL::integer, x.tick, x.traceparent, x.priority, x.group_key
        FROM ins x WHERE x.running;
        GET DIAGNOSTICS handed2 = ROW_COUNT;
        handed := handed + handed2;
        promoted := promoted + cardinality(gone_p);
    END IF;

    IF moved_n < known_n THEN
        -- A known successor was not where its head said (never, while
        -- every writer keeps the rule; a table rewrite moves rows): the
        -- general path gives these ordering_ids a head.
        SELECT array_agg(u.p), array_agg(u.o) INTO back_p, back_o
        FROM unnest(partition_ids, ordering_ids, outcomes) AS u(p, o, outcome)
        WHERE u.outcome IN ('completed', 'dead')
          AND NOT EXISTS (SELECT 1 FROM pgsched.heads h WHERE h.partition_id = u.p AND h.ordering_id = u.o);
        IF back_p IS NOT NULL THEN
            PERFORM pgsched.settle_heads(back_p, back_o);
            promoted := promoted + cardinality(back_p);
        END IF;
        back_p := NULL; back_o := NULL;
    END IF;

    IF cardinality(gone_id) IS DISTINCT FROM cardinality(task_ids) THEN
        SELECT b.back_id, b.freed INTO back_id, freed
        FROM pgsched.finish_give_back(p_node_id, p_epoch, partition_ids, ordering_ids, task_ids, claimed_ats, outcomes,
                                      retry_delays, errors) b;
    END IF;
    IF gone_lk IS NOT NULL THEN
        freed := freed + pgsched.limit_release(gone_lk, gone_lg);
        -- The room they leave goes to their kinds' next parked tasks at
        -- once, handed over like successors (finish_hand_limited).
        IF room - handed > 0 THEN
            RETURN QUERY
            SELECT NULL::bigint[], x.partition_id, x.id, x.ordering_id::text, x.scheduled_at, x.uniqueness_key::text,
                   x.kind, x.payload, x.attempt, x.run_at, x.claimed_at, NULL::integer, x.tick, x.traceparent, x.priority, x.group_key
            FROM pgsched.finish_hand_limited(p_node_id, p_epoch, gone_lk, v_held, room - handed, t_now) x;
            GET DIAGNOSTICS got = ROW_COUNT;
            handed := handed + got;
        END IF;
    END IF;

    applied := coalesce(gone_id, '{}') || coalesce(back_id, '{}');
    -- Heads this call left idle for a claim to take (promoted, not handed
    -- over, counted from the heads flagged as having a backlog: one whose
    -- backlog a cancel emptied counts too), given back, and room freed
    -- under a limit. Zero: nothing new may have become due.
    claimable := promoted - handed + coalesce(cardinality(back_id), 0) + freed;
    RETURN NEXT;
END
$$;
