-- settle_heads makes each given ordering_id's head its earliest task again
-- after its tasks changed: the earliest backlog task (by scheduled_at, then
-- id) becomes the head when there is none, or when it comes before an idle
-- head, which then goes back to the backlog. A running head stays. It also
-- sets each head's backlog flag. One statement for the whole set; the
-- caller holds the heads' locks (or has deleted them in this transaction).
CREATE OR REPLACE FUNCTION pgsched.settle_heads(partition_ids integer[], ordering_ids text[])
RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_custom_plan
SET jit = off
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_material = off
AS $$
DECLARE
    v_one     integer;
    q         record;
    v_demoted pgsched.backlog[];
    v_new     pgsched.heads[];
    v_n       integer;
    -- A head of a limited kind is written parked (pgsched.set_limit).
    v_limited text[] := ARRAY(SELECT l.kind FROM pgsched.kind_limits l);
BEGIN
    -- Citus: one partition per call (each statement names it, so
    -- Citus routes it to the worker holding it); a call spanning several
    -- runs once per partition, in partition order.
    IF (SELECT count(DISTINCT x.p) FROM unnest(partition_ids) AS x(p)) > 1 THEN
        FOR q IN SELECT x.p, array_agg(x.o) AS o FROM unnest(partition_ids, ordering_ids) AS x(p, o) GROUP BY x.p ORDER BY x.p LOOP
            PERFORM pgsched.settle_heads(array_fill(q.p, ARRAY[cardinality(q.o)]), q.o);
        END LOOP;
        RETURN;
    END IF;
    v_one := partition_ids[1];

    WITH k AS (
        SELECT DISTINCT a.p, a.o FROM unnest(partition_ids, ordering_ids) AS a(p, o)
    ), st AS (
        -- The earliest backlog task (two index probes whatever the length)
        -- and the head, if any; swap: the backlog task becomes the head.
        SELECT k.p, k.o, b.scheduled_at, b.uniqueness_key, b.id, b.kind, b.payload, b.run_at, b.attempt,
               b.revision, b.last_error, b.created_at, b.tick, b.traceparent, b.priority, b.group_key,
               b.id IS NOT NULL AS has_next, h.ordering_id IS NOT NULL AS has_head, h.backlog AS flag,
               b.id IS NOT NULL AND (h.ordering_id IS NULL
                   OR (NOT h.running AND (b.scheduled_at, b.id) < (h.scheduled_at, h.id))) AS swap
        FROM k
        LEFT JOIN LATERAL (
            SELECT b.* FROM pgsched.backlog b
            WHERE b.partition_id = k.p AND b.ordering_id = k.o AND b.partition_id = v_one
              AND b.scheduled_at = (SELECT b2.scheduled_at FROM pgsched.backlog b2
                                    WHERE b2.partition_id = k.p AND b2.ordering_id = k.o AND b2.partition_id = v_one
                                    ORDER BY b2.scheduled_at LIMIT 1)
            ORDER BY b.id LIMIT 1
        ) b ON true
        LEFT JOIN pgsched.heads h ON h.partition_id = k.p AND h.ordering_id = k.o AND h.partition_id = v_one
    ), popped AS (
        DELETE FROM pgsched.backlog b USING st
        WHERE st.swap AND b.partition_id = st.p AND b.ordering_id = st.o AND b.partition_id = v_one
          AND b.scheduled_at = st.scheduled_at AND b.uniqueness_key = st.uniqueness_key
    ), flagged AS (
        UPDATE pgsched.heads h SET backlog = st.has_next, next_tids = NULL, next_ids = NULL
        FROM st
        WHERE NOT st.swap AND st.has_head AND st.flag <> st.has_next
          AND h.partition_id = st.p AND h.ordering_id = st.o AND h.partition_id = v_one
    -- Citus: the statement above with only a DELETE and an UPDATE among
    -- its modifying CTEs, which Citus routes whole to the partition's shard
    -- (see finish_tasks); the rows to insert come back as arrays, each
    -- written by an INSERT ... SELECT that names its partition's row of
    -- partition_anchor, so that it too is routed whole.
    )
    SELECT (SELECT array_agg(ROW(h.partition_id, h.ordering_id, h.scheduled_at, h.uniqueness_key, h.id, h.kind, h.payload,
                                 h.run_at, h.attempt, h.revision, h.last_error, h.created_at, h.tick, h.traceparent,
                                 h.priority, h.group_key)::pgsched.backlog)
            FROM st JOIN pgsched.heads h ON h.partition_id = st.p AND h.ordering_id = st.o AND h.partition_id = v_one
            WHERE st.swap AND st.has_head),
           (SELECT array_agg(ROW(st.p, st.o, st.scheduled_at, st.uniqueness_key, st.id, st.kind, st.payload,
                                 st.run_at, st.attempt, st.revision, st.last_error, st.created_at,
                                 st.has_head OR EXISTS (SELECT 1 FROM pgsched.backlog b
                                                        WHERE b.partition_id = st.p AND b.ordering_id = st.o AND b.partition_id = v_one
                                                          AND (b.scheduled_at, b.uniqueness_key) <> (st.scheduled_at, st.uniqueness_key)),
                                 false, NULL::text, NULL::bigint, NULL::timestamptz, 0, NULL::tid[], NULL::bigint[], false, false,
                                 st.tick, st.traceparent, st.priority, st.group_key)::pgsched.heads)
            FROM st WHERE st.swap)
    INTO v_demoted, v_new;
    IF v_demoted IS NOT NULL THEN
        INSERT INTO pgsched.backlog (partition_id, ordering_id, scheduled_at, uniqueness_key, id, kind, payload,
                                     run_at, attempt, revision, last_error, created_at, tick, traceparent, priority, group_key)
        SELECT a.partition_id, x.ordering_id, x.scheduled_at, x.uniqueness_key, x.id, x.kind, x.payload,
               x.run_at, x.attempt, x.revision, x.last_error, x.created_at, x.tick, x.traceparent, x.priority, x.group_key
        FROM pgsched.partition_anchor a, unnest(v_demoted) AS x
        WHERE a.partition_id = v_one;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        IF v_n <> cardinality(v_demoted) THEN
            RAISE EXCEPTION 'pgsched: partition_anchor has no row for partition %', v_one USING ERRCODE = 'no_data_found';
        END IF;
    END IF;
    IF v_new IS NOT NULL THEN
        INSERT INTO pgsched.heads AS h (partition_id, ordering_id, scheduled_at, uniqueness_key, id, kind, payload,
                                        run_at, attempt, revision, last_error, created_at, tick, traceparent, priority, group_key, backlog,
                                        chain)
        SELECT a.partition_id, x.ordering_id, x.scheduled_at, x.uniqueness_key, x.id, x.kind, x.payload,
               x.run_at, x.attempt, x.revision, x.last_error, x.created_at, x.tick, x.traceparent, x.priority, x.group_key, x.backlog,
               CASE WHEN x.kind = ANY (v_limited) THEN -1 ELSE 0 END
        FROM pgsched.partition_anchor a, unnest(v_new) AS x
        WHERE a.partition_id = v_one
        ON CONFLICT (partition_id, ordering_id) DO UPDATE
        SET scheduled_at = excluded.scheduled_at, uniqueness_key = excluded.uniqueness_key, id = excluded.id,
            kind = excluded.kind, payload = excluded.payload, run_at = excluded.run_at, attempt = excluded.attempt,
            revision = excluded.revision, last_error = excluded.last_error, created_at = excluded.created_at,
            tick = excluded.tick, traceparent = excluded.traceparent, priority = excluded.priority, group_key = excluded.group_key,
            backlog = excluded.backlog, chain = excluded.chain, next_tids = NULL, next_ids = NULL, paused = false;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        IF v_n <> cardinality(v_new) THEN
            RAISE EXCEPTION 'pgsched: partition_anchor has no row for partition %', v_one USING ERRCODE = 'no_data_found';
        END IF;
    END IF;

END
$$;
