-- lock_heads locks the heads of the given ordering_ids in key order (every
-- locker of several heads goes in this order, so they cannot deadlock), one
-- index probe each.
CREATE OR REPLACE FUNCTION pgsched.lock_heads(partition_ids integer[], ordering_ids text[])
RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    q     record;
    v_one integer;
BEGIN
    -- Citus: one partition per statement, in partition order.
    IF (SELECT count(DISTINCT x.p) FROM unnest(partition_ids) AS x(p)) > 1 THEN
        FOR q IN SELECT x.p, array_agg(x.o) AS o FROM unnest(partition_ids, ordering_ids) AS x(p, o) GROUP BY x.p ORDER BY x.p LOOP
            PERFORM pgsched.lock_heads(array_fill(q.p, ARRAY[cardinality(q.o)]), q.o);
        END LOOP;
        RETURN;
    END IF;
    v_one := partition_ids[1];

    PERFORM 1 FROM (
        SELECT DISTINCT a.p, a.o COLLATE "C" AS o FROM unnest(partition_ids, ordering_ids) AS a(p, o)
        ORDER BY a.p, o
    ) a
    CROSS JOIN LATERAL (
        SELECT 1 FROM pgsched.heads h WHERE h.partition_id = a.p AND h.ordering_id = a.o AND h.partition_id = v_one
        LIMIT 1 FOR UPDATE
    ) l;
END
$$;
