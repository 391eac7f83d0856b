-- lock_heads locks the heads of the given ordering_ids in key order (every
-- locker of several heads goes in this order, so they cannot deadlock), one
-- index probe each.
CREATE OR REPLACE FUNCTION pgsched.lock_heads(partition_ids integer[], ordering_ids text[])
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM 1 FROM (
        SELECT DISTINCT a.p, a.o COLLATE "C" AS o FROM unnest(partition_ids, ordering_ids) AS a(p, o)
        ORDER BY a.p, o
    ) a
    CROSS JOIN LATERAL (
        SELECT 1 FROM pgsched.heads h WHERE h.partition_id = a.p AND h.ordering_id = a.o
        LIMIT 1 FOR UPDATE
    ) l;
END
$$;
