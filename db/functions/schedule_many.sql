-- schedule_many enqueues a batch atomically and returns an array with one
-- result per input position: inserted, updated or already_completed. Any invalid
-- task, or a key that is running, rejects the whole batch with an error
-- naming the field (SQLSTATE PGS01 invalid, PGS02 in the past, PGS03
-- running). A key given twice in one batch: the last one wins, as if the
-- batch were enqueued in turn, and both positions report its result. A NULL
-- or empty kind is 'default', a NULL payload {}.
--
-- traceparents: each task's W3C trace context (schedule_check says which
-- are valid), kept with the task for its run's span (docs/tracing.md);
-- NULL, or a NULL or '' element, for none. Overwriting a task replaces it.
--
-- priorities: each task's priority (higher runs first; NULL, or a NULL
-- element, 0), recorded in priority_levels when not 0. group_keys: each
-- task's group (NULL, or a NULL or '' element, for none). Overwriting a
-- pending task replaces both.
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
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s pgsched.settings;
    t_now timestamptz := now();
    -- A head of a limited kind is written parked (pgsched.set_limit).
    v_limited text[] := ARRAY(SELECT l.kind FROM pgsched.kind_limits l);
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
BEGIN
    SELECT * INTO STRICT s FROM pgsched.settings;
    PERFORM pgsched.schedule_check(ordering_ids, scheduled_ats, uniqueness_keys, payloads, kinds, s, t_now, traceparents,
                                   priorities, group_keys);
    IF n = 0 THEN
        RETURN '{}';
    END IF;
    IF priorities IS NOT NULL THEN
        PERFORM pgsched.priority_levels_add(priorities);
    END IF;

    SELECT array_agg(pgsched.partition_of(u.o, s.partition_count) ORDER BY u.i) INTO parts
    FROM unnest(ordering_ids) WITH ORDINALITY AS u(o, i);


    -- Lock every ordering_id's head in key order (no deadlock with other
    -- batches and finishers), writing the batch's earliest task as the head
    -- where there is none; see docs/design.md, "schedule_many".
    IF new_keys THEN
        WITH ins AS (
            INSERT INTO pgsched.heads AS h (partition_id, ordering_id, scheduled_at, uniqueness_key, kind, payload, run_at, traceparent,
                                            priority, group_key, chain)
            SELECT f.p, f.o, f.sa, f.uk, f.k, f.pl, f.sa, f.tp, f.pr, f.gk, CASE WHEN f.k = ANY (v_limited) THEN -1 ELSE 0 END FROM (
                SELECT DISTINCT ON (x.p, x.o COLLATE "C") x.p, x.o COLLATE "C" AS o, x.sa, coalesce(x.uk, '') COLLATE "C" AS uk,
                       coalesce(x.pl, '{}'::jsonb) AS pl, coalesce(nullif(x.k, ''), 'default') AS k, nullif(x.tp, '') AS tp,
                       coalesce(x.pr, 0) AS pr, nullif(x.gk, '') AS gk
                FROM unnest(parts, ordering_ids, scheduled_ats, uniqueness_keys, payloads, kinds, traceparents, priorities, group_keys)
                     WITH ORDINALITY AS x(p, o, sa, uk, pl, k, tp, pr, gk, i)
                ORDER BY x.p, x.o COLLATE "C", x.sa, coalesce(x.uk, '') COLLATE "C", x.i DESC
            ) f
            ORDER BY f.p, f.o
            RETURNING h.id
        )
        SELECT array_agg(ins.id) INTO fresh_ids FROM ins;
    ELSE
        WITH ins AS (
            INSERT INTO pgsched.heads AS h (partition_id, ordering_id, scheduled_at, uniqueness_key, kind, payload, run_at, traceparent,
                                            priority, group_key, chain)
            SELECT f.p, f.o, f.sa, f.uk, f.k, f.pl, f.sa, f.tp, f.pr, f.gk, CASE WHEN f.k = ANY (v_limited) THEN -1 ELSE 0 END FROM (
                SELECT DISTINCT ON (x.p, x.o COLLATE "C") x.p, x.o COLLATE "C" AS o, x.sa, coalesce(x.uk, '') COLLATE "C" AS uk,
                       coalesce(x.pl, '{}'::jsonb) AS pl, coalesce(nullif(x.k, ''), 'default') AS k, nullif(x.tp, '') AS tp,
                       coalesce(x.pr, 0) AS pr, nullif(x.gk, '') AS gk
                FROM unnest(parts, ordering_ids, scheduled_ats, uniqueness_keys, payloads, kinds, traceparents, priorities, group_keys)
                     WITH ORDINALITY AS x(p, o, sa, uk, pl, k, tp, pr, gk, i)
                ORDER BY x.p, x.o COLLATE "C", x.sa, coalesce(x.uk, '') COLLATE "C", x.i DESC
            ) f
            ORDER BY f.p, f.o
            ON CONFLICT (partition_id, ordering_id) DO UPDATE SET revision = h.revision WHERE false
            RETURNING h.id
        )
        SELECT array_agg(ins.id) INTO fresh_ids FROM ins;
    END IF;
    -- n heads written for n positions: every position is its key's.
    fresh_all := coalesce(cardinality(fresh_ids), 0) = n;
    IF NOT fresh_all THEN
        -- The batch may change these ordering_ids' backlogs: their heads
        -- forget their known successors first (see "Known successors").
        UPDATE pgsched.heads h SET next_tids = NULL, next_ids = NULL
        FROM (SELECT DISTINCT x.p, x.o COLLATE "C" AS o FROM unnest(parts, ordering_ids) AS x(p, o)) k
        WHERE h.partition_id = k.p AND h.ordering_id = k.o AND h.next_tids IS NOT NULL;
    END IF;
    IF NOT fresh_all AND fresh_ids IS NOT NULL THEN
        SELECT array_agg(f.i) INTO fresh FROM (
            SELECT DISTINCT ON (x.p, x.o COLLATE "C") x.p, x.o COLLATE "C" AS o, x.i
            FROM unnest(parts, ordering_ids, scheduled_ats, uniqueness_keys) WITH ORDINALITY AS x(p, o, sa, uk, i)
            ORDER BY x.p, x.o COLLATE "C", x.sa, coalesce(x.uk, '') COLLATE "C", x.i DESC
        ) f
        JOIN pgsched.heads h ON h.partition_id = f.p AND h.ordering_id = f.o
        JOIN unnest(fresh_ids) AS w(id) ON w.id = h.id;
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
          AND h.uniqueness_key = coalesce(u.uk, '') AND NOT h.running;
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
                                 AND h.scheduled_at = c.sa AND h.uniqueness_key = c.uk
        WHERE NOT c.fresh
    ), hu AS (
        UPDATE pgsched.heads h SET kind = r.k, payload = r.pl, traceparent = r.tp, priority = r.pr, group_key = r.gk,
                                   revision = h.revision + 1, paused = false
        FROM rest r
        WHERE r.is_head AND NOT r.head_running AND h.partition_id = r.p AND h.ordering_id = r.o
        RETURNING h.partition_id, h.ordering_id, h.scheduled_at, h.uniqueness_key
    ), bl AS (
        INSERT INTO pgsched.backlog AS b (partition_id, ordering_id, scheduled_at, uniqueness_key, kind, payload, run_at, traceparent,
                                          priority, group_key)
        SELECT r.p, r.o, r.sa, r.uk, r.k, r.pl, r.sa, r.tp, r.pr, r.gk FROM rest r WHERE NOT r.is_head
        ORDER BY r.p, r.o, r.sa, r.uk
        ON CONFLICT (partition_id, ordering_id, scheduled_at, uniqueness_key) DO UPDATE
        SET kind = excluded.kind, payload = excluded.payload, traceparent = excluded.traceparent, priority = excluded.priority,
            group_key = excluded.group_key, revision = b.revision + 1
        RETURNING b.partition_id, b.ordering_id, b.scheduled_at, b.uniqueness_key, (b.revision = 0) AS inserted
    ), kr AS (
        SELECT c.p, c.o, c.sa, c.uk, 'inserted' AS r FROM cand c WHERE c.fresh
        UNION ALL
        SELECT r.p, r.o, r.sa, r.uk, NULL FROM rest r WHERE r.head_running
        UNION ALL
        SELECT x.partition_id, x.ordering_id, x.scheduled_at, x.uniqueness_key, 'updated' FROM hu x
        UNION ALL
        SELECT x.partition_id, x.ordering_id, x.scheduled_at, x.uniqueness_key,
               CASE WHEN x.inserted THEN 'inserted' ELSE 'updated' END FROM bl x
    ), res AS (
        SELECT array_agg(CASE WHEN u.completed THEN 'already_completed' ELSE kr.r END ORDER BY u.i) AS results
        FROM u LEFT JOIN kr ON kr.p = u.p AND kr.o = u.o AND kr.sa = u.sa AND kr.uk = u.uk
    ), st AS (
        SELECT array_agg(x.partition_id) AS p, array_agg(x.ordering_id) AS o FROM bl x
    )
    SELECT res.results, st.p, st.o INTO results, settle_p, settle_o FROM res, st;

    PERFORM pgsched.schedule_settle(results, parts, ordering_ids, scheduled_ats, uniqueness_keys, done, settle_p, settle_o,
                                    t_now + s.notify_horizon);
    RETURN results;
END
$$;
