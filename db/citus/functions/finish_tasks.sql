-- finish_tasks on Citus: what db/functions/finish_tasks.sql does on one
-- server (see there), with every statement naming one partition, so Citus
-- routes it to the worker holding it. A batch spanning partitions goes
-- through finish_tasks_split, a call per partition. v_top: the highest
-- priority in use, below which no successor is handed over.
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
SET plan_cache_mode = force_custom_plan
SET jit = off
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_material = off
AS $$
#variable_conflict use_column
DECLARE
    gone_p  integer[];
    gone_o  text[];
    gone_c  integer[];
    gone_id bigint[];
    back_p  integer[];
    back_o  text[];
    back_id bigint[];
    room    integer := coalesce(p_chain, 0);
    known_n integer;
    moved_n integer;
    promoted integer := 0;
    handed  integer := 0;
    handed2 integer;
    v_paused text[] := '{}';
    v_top   integer := 0;
    t_now   timestamptz := now(); -- Citus refuses now() in RETURNING and CASE
    retry_ats timestamptz[];
    v_one integer;
    v_tomb  pgsched.completions[];
    v_dead  pgsched.dead_tasks[];
    v_new   pgsched.heads[];
    -- Limited kinds' successors and give-backs are parked (set_limit).
    v_limited text[] := ARRAY(SELECT l.kind FROM pgsched.kind_limits l);
    freed   integer;
BEGIN
    IF (SELECT count(DISTINCT x.p) FROM unnest(partition_ids) AS x(p)) > 1 THEN
        RETURN QUERY SELECT * FROM pgsched.finish_tasks_split(p_node_id, p_epoch, partition_ids, ordering_ids, task_ids, claimed_ats,
                                                              outcomes, retry_delays, errors, room, p_chain_partitions, p_chain_limit);
        RETURN;
    END IF;
    v_one := partition_ids[1];

    IF EXISTS (SELECT 1 FROM unnest(outcomes) AS x(outcome) WHERE x.outcome NOT IN ('completed', 'dead')) THEN
        PERFORM pgsched.lock_heads(partition_ids, ordering_ids);
    END IF;

    IF room > 0 AND EXISTS (SELECT 1 FROM pgsched.nodes n
                            WHERE n.node_id = p_node_id AND n.epoch = p_epoch AND n.lease_expires_at > t_now
                              AND n.timeline IN (0, pgsched.timeline())) THEN
        SELECT coalesce(array_agg(k.kind), '{}'), greatest((SELECT max(l.priority) FROM pgsched.priority_levels l), 0)
        INTO v_paused, v_top FROM pgsched.paused_kinds k;
        v_paused := v_paused || v_limited;
    ELSE
        room := 0;
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
          AND h.node_id = p_node_id AND h.epoch = p_epoch AND h.claimed_at = b.ca AND h.partition_id = v_one
        RETURNING h.*, b.outcome, b.err
    ), known AS (
        SELECT g.partition_id AS p, g.ordering_id AS o, g.chain AS c, g.next_tids[1] AS tid, g.next_ids[1] AS id,
               g.next_tids[2:] AS rest_tids, g.next_ids[2:] AS rest_ids, g.next_more AS more_after,
               row_number() OVER () AS i
        FROM gone g WHERE g.backlog AND cardinality(g.next_tids) > 0
    ), moved AS (
        DELETE FROM pgsched.backlog b USING known k
        WHERE b.partition_id = k.p AND b.id = k.id AND b.ordering_id = k.o AND b.ctid = k.tid AND b.partition_id = v_one
        RETURNING b.*, k.rest_tids, k.rest_ids, k.more_after, k.c AS prev_chain,
                  coalesce(k.i <= room AND b.run_at <= t_now AND k.c < p_chain_limit AND b.priority >= v_top
                           AND b.partition_id = ANY (p_chain_partitions) AND b.kind <> ALL (v_paused), false) AS run
    -- Citus routes a statement whole only when its modifying CTEs are
    -- DELETEs or UPDATEs: the rows to insert come back as arrays and the
    -- INSERTs follow, statements of their own (docs/design.md).
    )
    SELECT array_agg(g.partition_id) FILTER (WHERE g.backlog AND coalesce(cardinality(g.next_tids), 0) = 0),
           array_agg(g.ordering_id) FILTER (WHERE g.backlog AND coalesce(cardinality(g.next_tids), 0) = 0),
           array_agg(g.chain) FILTER (WHERE g.backlog AND coalesce(cardinality(g.next_tids), 0) = 0),
           array_agg(g.id), count(*) FILTER (WHERE g.backlog AND cardinality(g.next_tids) > 0), count(*) FILTER (WHERE g.chain = -2),
           array_agg(ROW(g.partition_id, g.ordering_id, g.scheduled_at, g.uniqueness_key, g.kind, g.attempt, g.node_id,
                         t_now, g.tick, NULL::jsonb)::pgsched.completions) FILTER (WHERE g.outcome = 'completed'),
           array_agg(ROW(g.partition_id, g.id, g.ordering_id, g.scheduled_at, g.uniqueness_key, g.kind, g.payload, g.attempt,
                         g.err, g.node_id, t_now, g.tick, g.traceparent, g.priority, g.group_key)::pgsched.dead_tasks) FILTER (WHERE g.outcome = 'dead'),
           (SELECT array_agg(ROW(m.partition_id, m.ordering_id, m.scheduled_at, m.uniqueness_key, m.id, m.kind, m.payload,
                   m.run_at, m.attempt + m.run::integer, m.revision, m.last_error, m.created_at,
                   cardinality(m.rest_tids) > 0 OR m.more_after,
                   m.run, CASE WHEN m.run THEN p_node_id END, CASE WHEN m.run THEN p_epoch END,
                   CASE WHEN m.run THEN t_now END, CASE WHEN m.run THEN greatest(m.prev_chain, 0) + 1 WHEN m.kind = ANY (v_limited) THEN -1 ELSE 0 END,
                   CASE WHEN cardinality(m.rest_tids) > 0 THEN m.rest_tids END,
                   CASE WHEN cardinality(m.rest_tids) > 0 THEN m.rest_ids END, m.more_after, false, m.tick, m.traceparent, m.priority, m.group_key)::pgsched.heads)
            FROM moved m)
    INTO gone_p, gone_o, gone_c, gone_id, known_n, freed, v_tomb, v_dead, v_new FROM gone g;
    IF v_tomb IS NOT NULL THEN
        INSERT INTO pgsched.completions SELECT x.* FROM unnest(v_tomb) AS x;
    END IF;
    IF v_dead IS NOT NULL THEN
        INSERT INTO pgsched.dead_tasks SELECT x.* FROM unnest(v_dead) AS x;
    END IF;
    moved_n := coalesce(cardinality(v_new), 0);
    IF v_new IS NOT NULL THEN
        INSERT INTO pgsched.heads SELECT x.* FROM unnest(v_new) AS x;
        RETURN QUERY
        SELECT NULL::bigint[], x.partition_id, x.id, x.ordering_id::text, x.scheduled_at, x.uniqueness_key::text,
               x.kind, x.payload, x.attempt, x.run_at, x.claimed_at, NULL::integer, x.tick, x.traceparent, x.priority, x.group_key
        FROM unnest(v_new) x WHERE x.running;
        GET DIAGNOSTICS handed = ROW_COUNT;
    END IF;
    promoted := moved_n;

    IF gone_p IS NOT NULL THEN
        -- The others' next task, in a statement of its own whose fresh
        -- snapshot sees every task enqueued before (as on one server).
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
                    WHERE b.partition_id = k.p AND b.ordering_id = k.o AND b.partition_id = v_one
                    ORDER BY b.scheduled_at, b.uniqueness_key LIMIT 10
                ) x
            ) f
            LEFT JOIN LATERAL (
                SELECT b.ctid AS tid, b.id FROM pgsched.backlog b
                WHERE f.n > 1 AND f.nd < f.n
                  AND b.partition_id = k.p AND b.ordering_id = k.o AND b.scheduled_at = f.sa1 AND b.partition_id = v_one
                ORDER BY b.id LIMIT 1
            ) t ON true
        ), moved AS (
            DELETE FROM pgsched.backlog b USING pick
            WHERE b.partition_id = pick.p AND b.ctid = pick.tid
              AND b.ordering_id = pick.o AND b.id = pick.bid AND b.partition_id = v_one
            RETURNING b.*, pick.more, pick.next_tids, pick.next_ids, pick.next_more, pick.c AS prev_chain,
                      coalesce(pick.i + known_n <= room AND b.run_at <= t_now AND pick.c < p_chain_limit AND b.priority >= v_top
                               AND b.partition_id = ANY (p_chain_partitions) AND b.kind <> ALL (v_paused), false) AS run
        -- Routed whole, the INSERT apart (see the first statement).
        )
        SELECT array_agg(ROW(m.partition_id, m.ordering_id, m.scheduled_at, m.uniqueness_key, m.id, m.kind, m.payload,
                   m.run_at, m.attempt + m.run::integer, m.revision, m.last_error, m.created_at, m.more,
                   m.run, CASE WHEN m.run THEN p_node_id END, CASE WHEN m.run THEN p_epoch END,
                   CASE WHEN m.run THEN t_now END, CASE WHEN m.run THEN greatest(m.prev_chain, 0) + 1 WHEN m.kind = ANY (v_limited) THEN -1 ELSE 0 END,
                   m.next_tids, m.next_ids, m.next_more, false, m.tick, m.traceparent, m.priority, m.group_key)::pgsched.heads)
        INTO v_new FROM moved m;
        handed2 := 0;
        IF v_new IS NOT NULL THEN
            INSERT INTO pgsched.heads SELECT x.* FROM unnest(v_new) AS x;
            RETURN QUERY
            SELECT NULL::bigint[], x.partition_id, x.id, x.ordering_id::text, x.scheduled_at, x.uniqueness_key::text,
                   x.kind, x.payload, x.attempt, x.run_at, x.claimed_at, NULL::integer, x.tick, x.traceparent, x.priority, x.group_key
            FROM unnest(v_new) AS x WHERE x.running;
            GET DIAGNOSTICS handed2 = ROW_COUNT;
        END IF;

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
          AND NOT EXISTS (SELECT 1 FROM pgsched.heads h WHERE h.partition_id = u.p AND h.ordering_id = u.o AND h.partition_id = v_one);
        IF back_p IS NOT NULL THEN
            PERFORM pgsched.settle_heads(back_p, back_o);
            promoted := promoted + cardinality(back_p);
        END IF;
        back_p := NULL; back_o := NULL;
    END IF;

    IF cardinality(gone_id) IS DISTINCT FROM cardinality(task_ids) THEN
        -- Retry times computed apart: Citus refuses a STABLE function over
        -- a column in an UPDATE.
        retry_ats := ARRAY(SELECT t_now + make_interval(secs => coalesce(d.delay, 0))
                           FROM unnest(retry_delays) WITH ORDINALITY AS d(delay, i) ORDER BY d.i);
        WITH back AS (
            UPDATE pgsched.heads h
            SET running = false, node_id = NULL, epoch = NULL, claimed_at = NULL, chain = CASE WHEN h.kind = ANY (v_limited) THEN -1 ELSE 0 END,
                run_at = CASE WHEN b.outcome IN ('retry', 'snooze') THEN b.retry_at ELSE h.run_at END,
                attempt = CASE WHEN b.outcome IN ('release', 'snooze') THEN greatest(h.attempt - 1, 0) ELSE h.attempt END,
                last_error = CASE WHEN b.outcome = 'retry' THEN b.err ELSE h.last_error END
            FROM unnest(partition_ids, ordering_ids, task_ids, claimed_ats, outcomes, retry_ats, errors)
                 AS b(p, o, id, ca, outcome, retry_at, err)
            WHERE h.partition_id = b.p AND h.ordering_id = b.o AND h.id = b.id
              AND h.node_id = p_node_id AND h.epoch = p_epoch AND h.claimed_at = b.ca AND b.outcome IN ('retry', 'release', 'snooze')
              AND h.partition_id = v_one
            RETURNING h.partition_id, h.ordering_id, h.id
        )
        SELECT array_agg(k.partition_id), array_agg(k.ordering_id), array_agg(k.id)
        INTO back_p, back_o, back_id FROM back k;
        IF back_id IS NOT NULL THEN
            -- A task enqueued earlier than the one given back runs first.
            PERFORM pgsched.settle_heads(back_p, back_o);
        END IF;
    END IF;

    applied := coalesce(gone_id, '{}') || coalesce(back_id, '{}');
    -- Heads this call left idle for a claim to take: promoted and not
    -- handed over (those looked for by the second statement counted from
    -- the heads flagged as having a backlog, so one whose backlog a cancel
    -- emptied meanwhile counts too), and given back. Zero tells the worker
    -- nothing new may have become due. Room a limit's finished tasks
    -- left counts too (on Citus limits count running tasks in heads).
    claimable := promoted - handed + coalesce(cardinality(back_id), 0) + freed;
    RETURN NEXT;
END
$$;
