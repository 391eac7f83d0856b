-- priority_levels_add records the non-zero priorities of a batch that
-- priority_levels does not list yet, so claims look for them. It reads
-- before it writes: a priority in use costs its enqueues an index probe,
-- not a write (on Citus, a write to every node).
CREATE OR REPLACE FUNCTION pgsched.priority_levels_add(priorities integer[])
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_new integer[];
BEGIN
    v_new := ARRAY(SELECT DISTINCT x.p FROM unnest(priorities) AS x(p)
                   WHERE x.p <> 0 AND NOT EXISTS (SELECT 1 FROM pgsched.priority_levels l WHERE l.priority = x.p));
    IF cardinality(v_new) > 0 THEN
        INSERT INTO pgsched.priority_levels (priority) SELECT unnest(v_new) ON CONFLICT DO NOTHING;
    END IF;
END
$$;
