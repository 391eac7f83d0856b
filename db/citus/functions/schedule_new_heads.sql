-- schedule_new_heads writes, for Citus's schedule_many, the earliest task of
-- each of a batch's ordering_ids as its head where the ordering_id has none
-- (all of them with new_keys, which fails with 23505 where one has), all
-- in partition p_partition, and returns the ids and ordering_ids it wrote.
-- Their ids are drawn here, on the coordinator, in the order one server's
-- INSERT draws them, and the INSERT selects the partition's row of
-- partition_anchor, so Citus routes it whole to the partition's shard
-- (selecting from the arrays alone, Citus runs the SELECT on the
-- coordinator and copies the rows over, about three times as long).
CREATE OR REPLACE FUNCTION pgsched.schedule_new_heads(p_partition integer, ordering_ids text[], scheduled_ats timestamptz[],
                                                      uniqueness_keys text[], payloads jsonb[], kinds text[], new_keys boolean,
                                                      t_now timestamptz, traceparents text[], priorities integer[], group_keys text[],
                                                      OUT fresh_ids bigint[], OUT fresh_o text[])
LANGUAGE plpgsql
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    q     record;
    nh_o  text[];
    nh_sa timestamptz[];
    nh_uk text[];
    nh_k  text[];
    nh_pl jsonb[];
    nh_id bigint[];
    nh_tp text[];
    nh_pr integer[];
    nh_gk text[];
    -- A head of a limited kind is written parked (pgsched.set_limit).
    v_limited text[] := ARRAY(SELECT l.kind FROM pgsched.kind_limits l);
BEGIN
    SELECT array_agg(f.o ORDER BY f.o), array_agg(f.sa ORDER BY f.o), array_agg(f.uk ORDER BY f.o),
           array_agg(f.k ORDER BY f.o), array_agg(f.pl ORDER BY f.o), array_agg(f.tp ORDER BY f.o),
           array_agg(f.pr ORDER BY f.o), array_agg(f.gk ORDER BY f.o)
    INTO nh_o, nh_sa, nh_uk, nh_k, nh_pl, nh_tp, nh_pr, nh_gk
    FROM (
        SELECT DISTINCT ON (x.o COLLATE "C") x.o COLLATE "C" AS o, x.sa, coalesce(x.uk, '') COLLATE "C" AS uk,
               coalesce(x.pl, '{}'::jsonb) AS pl, coalesce(nullif(x.k, ''), 'default') AS k, nullif(x.tp, '') AS tp,
               coalesce(x.pr, 0) AS pr, nullif(x.gk, '') AS gk
        FROM unnest(ordering_ids, scheduled_ats, uniqueness_keys, payloads, kinds, traceparents, priorities, group_keys)
             WITH ORDINALITY AS x(o, sa, uk, pl, k, tp, pr, gk, i)
        ORDER BY x.o COLLATE "C", x.sa, coalesce(x.uk, '') COLLATE "C", x.i DESC
    ) f;
    nh_id := ARRAY(SELECT nextval('pgsched.task_id_seq') FROM generate_series(1, cardinality(nh_o)));
    IF new_keys THEN
        FOR q IN
            INSERT INTO pgsched.heads AS h (partition_id, ordering_id, scheduled_at, uniqueness_key, kind, payload, run_at, id, created_at,
                                            traceparent, priority, group_key, chain)
            SELECT a.partition_id, x.o, x.sa, x.uk, x.k, x.pl, x.sa, x.id, t_now, x.tp, x.pr, x.gk,
                   CASE WHEN x.k = ANY (v_limited) THEN -1 ELSE 0 END
            FROM pgsched.partition_anchor a, unnest(nh_o, nh_sa, nh_uk, nh_k, nh_pl, nh_id, nh_tp, nh_pr, nh_gk)
                 WITH ORDINALITY AS x(o, sa, uk, k, pl, id, tp, pr, gk, i)
            WHERE a.partition_id = p_partition
            ORDER BY x.i
            RETURNING h.id, h.ordering_id
        LOOP
            fresh_ids := fresh_ids || q.id;
            fresh_o := fresh_o || q.ordering_id::text;
        END LOOP;
        IF coalesce(cardinality(fresh_ids), 0) <> cardinality(nh_o) THEN
            RAISE EXCEPTION 'pgsched: partition_anchor has no row for partition %', p_partition USING ERRCODE = 'no_data_found';
        END IF;
    ELSE
        FOR q IN
            INSERT INTO pgsched.heads AS h (partition_id, ordering_id, scheduled_at, uniqueness_key, kind, payload, run_at, id, created_at,
                                            traceparent, priority, group_key, chain)
            SELECT a.partition_id, x.o, x.sa, x.uk, x.k, x.pl, x.sa, x.id, t_now, x.tp, x.pr, x.gk,
                   CASE WHEN x.k = ANY (v_limited) THEN -1 ELSE 0 END
            FROM pgsched.partition_anchor a, unnest(nh_o, nh_sa, nh_uk, nh_k, nh_pl, nh_id, nh_tp, nh_pr, nh_gk)
                 WITH ORDINALITY AS x(o, sa, uk, k, pl, id, tp, pr, gk, i)
            WHERE a.partition_id = p_partition
            ORDER BY x.i
            ON CONFLICT (partition_id, ordering_id) DO UPDATE SET revision = h.revision WHERE false
            RETURNING h.id, h.ordering_id
        LOOP
            fresh_ids := fresh_ids || q.id;
            fresh_o := fresh_o || q.ordering_id::text;
        END LOOP;
    END IF;
END
$$;
