-- schedule_many enqueues a batch atomically and returns an array with one
-- result per input position: inserted, updated or already_completed. Any invalid
-- task, or a key that is running, rejects the whole batch with an error
-- naming the field (SQLSTATE PGS01 invalid, PGS02 in the past, PGS03
-- running). A key given twice in one batch: the last one wins, as if the
-- batch were enqueued in turn, and both positions report its result. A NULL
-- or empty kind is 'default', a NULL payload {}. traceparents, priorities
-- and group_keys: as on one server (db/functions/schedule_many.sql).
--
-- new_keys: a cheaper insert for batches of fresh ordering_ids; see
-- docs/design.md, "schedule_many".
CREATE OR REPLACE FUNCTION pgsched.schedule_many(
    ordering_ids    text[],
    scheduled_ats   timestamptz[],
    uniqueness_keys text[] DEFAULT NULL,
    payloads        jsonb[] DEFAULT NULL,
    kinds           text[] DEFAULT NULL,
    new_keys        boolean DEFAULT false,
    traceparents    text[] DEFAULT NULL,
    priorities      integer[] DEFAULT NULL,
    group_keys      text[] DEFAULT NULL
)
RETURNS text[]
LANGUAGE plpgsql
SET plan_cache_mode = force_custom_plan
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s pgsched.settings;
    t_now timestamptz := now();
    n integer := coalesce(cardinality(ordering_ids), 0);
    parts integer[];
    results text[];
    lo timestamptz;
    hi timestamptz;
    fresh integer[];
    fresh_ids bigint[];
    fresh_all boolean;
    done integer[];
    settle_p integer[];
    settle_o text[];
    v_one integer;
    q     record;
    kr_p  integer[] := '{}';
    kr_o  text[] := '{}';
    kr_sa timestamptz[] := '{}';
    kr_uk text[] := '{}';
    kr_r  text[] := '{}';
    nb_p  integer[];
    nb_o  text[];
    nb_sa timestamptz[];
    nb_uk text[];
    nb_k  text[];
    nb_pl jsonb[];
    nb_tp text[];
    nb_pr integer[];
    nb_gk text[];
    nb_id bigint[];
    fresh_o text[];
BEGIN
    -- Citus: enqueue on the coordinator only. Task ids, which order the
    -- tasks of one ordering_id with equal scheduled_at by enqueue, come from
    -- the coordinator's task_id_seq (a worker's nextval draws from a range
    -- of its own, from 2^48 up), and nodes listen for new work there.
    IF (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g) <> 0 THEN
        RAISE EXCEPTION 'pgsched: enqueue through the Citus coordinator, not a worker node'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Task ids, which order tasks of equal scheduled_at by enqueue, come from the coordinator''s sequence.';
    END IF;
    SELECT * INTO STRICT s FROM pgsched.settings;
    PERFORM pgsched.schedule_check(ordering_ids, scheduled_ats, uniqueness_keys, payloads, kinds, s, t_now, traceparents,
                                   priorities, group_keys);
    IF n = 0 THEN
        RETURN '{}';
    END IF;

    SELECT array_agg(pgsched.partition_of(u.o, s.partition_count) ORDER BY u.i) INTO parts
    FROM unnest(ordering_ids) WITH ORDINALITY AS u(o, i);

    -- Citus: each statement below names one partition, so Citus routes
    -- it to the worker holding it; a batch spanning partitions goes
    -- through schedule_many_split, a call per partition.
    IF (SELECT count(DISTINCT x.p) FROM unnest(parts) AS x(p)) > 1 THEN
        RETURN pgsched.schedule_many_split(parts, ordering_ids, scheduled_ats, uniqueness_keys, payloads, kinds, new_keys,
                                           traceparents, priorities, group_keys);
    END IF;
    v_one := parts[1];
    IF priorities IS NOT NULL THEN
        PERFORM pgsched.priority_levels_add(priorities);
    END IF;

    -- Lock every ordering_id's head in key order (no deadlock with other
    -- batches and finishers), writing the batch's earliest task as the head
    -- where there is none; see docs/design.md, "schedule_many".
    -- Citus: the same rows, each partition's in a statement Citus routes
    -- whole (see schedule_new_heads).
    SELECT h.fresh_ids, h.fresh_o INTO fresh_ids, fresh_o
    FROM pgsched.schedule_new_heads(v_one, ordering_ids, scheduled_ats, uniqueness_keys, payloads, kinds, new_keys, t_now, traceparents,
                                     priorities, group_keys) h;

    -- n heads written for n positions: every position is its key's.
    fresh_all := coalesce(cardinality(fresh_ids), 0) = n;
    IF NOT fresh_all THEN
        -- The batch may change these ordering_ids' backlogs: their heads
        -- forget their known successors first (see "Known successors").
        UPDATE pgsched.heads h SET next_tids = NULL, next_ids = NULL
        FROM (SELECT DISTINCT x.p, x.o COLLATE "C" AS o FROM unnest(parts, ordering_ids) AS x(p, o)) k
        WHERE h.partition_id = k.p AND h.ordering_id = k.o AND h.next_tids IS NOT NULL AND h.partition_id = v_one;
    END IF;
    IF NOT fresh_all AND fresh_ids IS NOT NULL THEN
        SELECT array_agg(f.i) INTO fresh FROM (
            SELECT DISTINCT ON (x.p, x.o COLLATE "C") x.p, x.o COLLATE "C" AS o, x.i
            FROM unnest(parts, ordering_ids, scheduled_ats, uniqueness_keys) WITH ORDINALITY AS x(p, o, sa, uk, i)
            ORDER BY x.p, x.o COLLATE "C", x.sa, coalesce(x.uk, '') COLLATE "C", x.i DESC
        ) f
        -- Citus: the INSERT returned the keys, no statement to a worker.
        JOIN unnest(fresh_o) AS w(o) ON w.o = f.o;
    END IF;

    -- With the heads locked, the next statement's fresh snapshot sees every
    -- completion of these ordering_ids: a completed key never runs again.
    -- A key completes after its scheduled_at and, as its finisher held the
    -- head lock we now hold, before now: the bounds [lo, hi] prune the
    -- daily completion partitions to those that can hold a tombstone of this
    -- batch (none when it is all in the future).
    lo := (SELECT min(u.sa) FROM unnest(scheduled_ats) AS u(sa));
    hi := clock_timestamp() + interval '1 minute';
    IF lo <= hi THEN
        SELECT array_agg(u.i) INTO done FROM unnest(parts, ordering_ids, scheduled_ats, uniqueness_keys) WITH ORDINALITY AS u(p, o, sa, uk, i)
        CROSS JOIN LATERAL (
            SELECT 1 FROM pgsched.completions c
            WHERE c.partition_id = u.p AND c.ordering_id = u.o AND c.scheduled_at = u.sa
              AND c.uniqueness_key = coalesce(u.uk, '') AND c.completed_at >= lo AND c.completed_at <= hi
              AND c.partition_id = v_one
            LIMIT 1) c;
    END IF;

    -- The common case: every task a new ordering_id's only task, none done.
    IF done IS NULL AND fresh_all THEN
        results := array_fill('inserted'::text, ARRAY[n]);
        IF lo <= t_now + s.notify_horizon THEN
            PERFORM pg_notify('pgsched.due', '');
        END IF;
        RETURN results;
    END IF;
    IF fresh_all THEN
        fresh := ARRAY(SELECT generate_series(1, n));
    END IF;

    -- Rare: a head just written for a completed key goes again.
    IF done IS NOT NULL AND fresh IS NOT NULL THEN
        DELETE FROM pgsched.heads h
        USING unnest(parts, ordering_ids, scheduled_ats, uniqueness_keys) WITH ORDINALITY AS u(p, o, sa, uk, i)
        WHERE u.i IN (SELECT unnest(fresh)) AND u.i IN (SELECT unnest(done))
          AND h.partition_id = u.p AND h.ordering_id = u.o AND h.scheduled_at = u.sa
          AND h.uniqueness_key = coalesce(u.uk, '') AND NOT h.running AND h.partition_id = v_one;
    END IF;

    -- Every other task of the batch: its key is an existing idle head
    -- (overwritten), a running head (PGS03 below) or goes to the backlog
    -- (inserted, or overwritten when there). Then the ordering_ids that
    -- got backlog tasks, or lost a head just written, are settled: a task
    -- earlier than an idle head takes its place.
    WITH u AS (
        SELECT x.i, x.p, x.o COLLATE "C" AS o, x.sa, coalesce(x.uk, '') COLLATE "C" AS uk,
               coalesce(x.pl, '{}'::jsonb) AS pl, coalesce(nullif(x.k, ''), 'default') AS k, nullif(x.tp, '') AS tp,
               coalesce(x.pr, 0) AS pr, nullif(x.gk, '') AS gk,
               x.i IN (SELECT unnest(done)) AS completed, x.i IN (SELECT unnest(fresh)) AS fresh
        FROM unnest(parts, ordering_ids, scheduled_ats, uniqueness_keys, payloads, kinds, traceparents, priorities, group_keys)
             WITH ORDINALITY AS x(p, o, sa, uk, pl, k, tp, pr, gk, i)
    ), cand AS (
        SELECT DISTINCT ON (u.p, u.o, u.sa, u.uk) u.*
        FROM u WHERE NOT u.completed
        ORDER BY u.p, u.o, u.sa, u.uk, u.i DESC
    ), rest AS (
        SELECT c.*, h.ordering_id IS NOT NULL AS is_head, coalesce(h.running, false) AS head_running
        FROM cand c
        LEFT JOIN pgsched.heads h ON h.partition_id = c.p AND h.ordering_id = c.o
                                 AND h.scheduled_at = c.sa AND h.uniqueness_key = c.uk AND h.partition_id = v_one
        WHERE NOT c.fresh
    ), hu AS (
        UPDATE pgsched.heads h SET kind = r.k, payload = r.pl, traceparent = r.tp, priority = r.pr, group_key = r.gk,
                                   revision = h.revision + 1, paused = false
        FROM rest r
        WHERE r.is_head AND NOT r.head_running AND h.partition_id = r.p AND h.ordering_id = r.o AND h.partition_id = v_one
        RETURNING h.partition_id, h.ordering_id, h.scheduled_at, h.uniqueness_key
    -- Citus: the same in three steps, so that no statement has an INSERT
    -- among its modifying CTEs (see finish_tasks): a statement routed whole
    -- to the partition's shard overwrites the idle heads and returns the
    -- results so far and the rows the backlog gets, the backlog's INSERT
    -- follows (routed whole through partition_anchor, as the heads' above),
    -- and the results are put together without a table.
    ), kr AS (
        SELECT c.p, c.o, c.sa, c.uk, 'inserted' AS r FROM cand c WHERE c.fresh
        UNION ALL
        SELECT r.p, r.o, r.sa, r.uk, NULL FROM rest r WHERE r.head_running
        UNION ALL
        SELECT x.partition_id, x.ordering_id, x.scheduled_at, x.uniqueness_key, 'updated' FROM hu x
    )
    SELECT coalesce(a.p, '{}'), coalesce(a.o, '{}'), coalesce(a.sa, '{}'), coalesce(a.uk, '{}'), coalesce(a.r, '{}'),
           b.p, b.o, b.sa, b.uk, b.k, b.pl, b.tp, b.pr, b.gk
    INTO kr_p, kr_o, kr_sa, kr_uk, kr_r, nb_p, nb_o, nb_sa, nb_uk, nb_k, nb_pl, nb_tp, nb_pr, nb_gk
    FROM (SELECT array_agg(kr.p) AS p, array_agg(kr.o::text) AS o, array_agg(kr.sa) AS sa, array_agg(kr.uk::text) AS uk,
                 array_agg(kr.r) AS r FROM kr) a,
         (SELECT array_agg(r.p ORDER BY r.p, r.o, r.sa, r.uk) AS p, array_agg(r.o::text ORDER BY r.p, r.o, r.sa, r.uk) AS o,
                 array_agg(r.sa ORDER BY r.p, r.o, r.sa, r.uk) AS sa, array_agg(r.uk::text ORDER BY r.p, r.o, r.sa, r.uk) AS uk,
                 array_agg(r.k ORDER BY r.p, r.o, r.sa, r.uk) AS k, array_agg(r.pl ORDER BY r.p, r.o, r.sa, r.uk) AS pl,
                 array_agg(r.tp ORDER BY r.p, r.o, r.sa, r.uk) AS tp, array_agg(r.pr ORDER BY r.p, r.o, r.sa, r.uk) AS pr,
                 array_agg(r.gk ORDER BY r.p, r.o, r.sa, r.uk) AS gk
          FROM rest r WHERE NOT r.is_head) b;
    IF nb_p IS NOT NULL THEN
        nb_id := ARRAY(SELECT nextval('pgsched.task_id_seq') FROM generate_series(1, cardinality(nb_p)));
        FOR q IN
            INSERT INTO pgsched.backlog AS b (partition_id, ordering_id, scheduled_at, uniqueness_key, kind, payload, run_at, id, created_at,
                                              traceparent, priority, group_key)
            SELECT a.partition_id, x.o, x.sa, x.uk, x.k, x.pl, x.sa, x.id, t_now, x.tp, x.pr, x.gk
            FROM pgsched.partition_anchor a, unnest(nb_o, nb_sa, nb_uk, nb_k, nb_pl, nb_id, nb_tp, nb_pr, nb_gk)
                 WITH ORDINALITY AS x(o, sa, uk, k, pl, id, tp, pr, gk, i)
            WHERE a.partition_id = v_one
            ORDER BY x.i
            ON CONFLICT (partition_id, ordering_id, scheduled_at, uniqueness_key) DO UPDATE
            SET kind = excluded.kind, payload = excluded.payload, traceparent = excluded.traceparent, priority = excluded.priority,
                group_key = excluded.group_key, revision = b.revision + 1
            RETURNING b.partition_id, b.ordering_id, b.scheduled_at, b.uniqueness_key, (b.revision = 0) AS inserted
        LOOP
            kr_p := kr_p || q.partition_id;
            kr_o := kr_o || q.ordering_id::text;
            kr_sa := kr_sa || q.scheduled_at;
            kr_uk := kr_uk || q.uniqueness_key::text;
            kr_r := kr_r || CASE WHEN q.inserted THEN 'inserted' ELSE 'updated' END;
            settle_p := settle_p || q.partition_id;
            settle_o := settle_o || q.ordering_id::text;
        END LOOP;
        IF coalesce(cardinality(settle_p), 0) <> cardinality(nb_p) THEN
            RAISE EXCEPTION 'pgsched: partition_anchor has no row for partition %', v_one USING ERRCODE = 'no_data_found';
        END IF;
    END IF;
    SELECT array_agg(CASE WHEN u.completed THEN 'already_completed' ELSE kr.r END ORDER BY u.i) INTO results
    FROM (SELECT x.i, x.p, x.o, x.sa, coalesce(x.uk, '') AS uk, x.i IN (SELECT unnest(done)) AS completed
          FROM unnest(parts, ordering_ids, scheduled_ats, uniqueness_keys) WITH ORDINALITY AS x(p, o, sa, uk, i)) u
    LEFT JOIN unnest(kr_p, kr_o, kr_sa, kr_uk, kr_r) AS kr(p, o, sa, uk, r)
           ON kr.p = u.p AND kr.o = u.o AND kr.sa = u.sa AND kr.uk = u.uk;

    PERFORM pgsched.schedule_settle(results, parts, ordering_ids, scheduled_ats, uniqueness_keys, done, settle_p, settle_o,
                                    t_now + s.notify_horizon);
    RETURN results;
END
$$;
