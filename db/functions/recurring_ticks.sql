-- recurring_ticks finds a schedule's next pending tick and how its last one
-- ended, as the recurring view shows them, with a probe per task table in
-- the schedule's partition. SECURITY DEFINER: the view's reader (the
-- <schema>_read role) reads no table itself.
CREATE OR REPLACE FUNCTION pgsched.recurring_ticks(p_name text, OUT next_at timestamptz, OUT last_at timestamptz,
                                                   OUT last_result text)
LANGUAGE plpgsql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p integer := pgsched.partition_of(p_name, (SELECT s.partition_count FROM pgsched.settings s));
BEGIN
    SELECT min(t.scheduled_at) INTO next_at FROM (
        SELECT h.scheduled_at FROM pgsched.heads h
        WHERE h.partition_id = p AND h.ordering_id = p_name AND h.tick
        UNION ALL
        SELECT b.scheduled_at FROM pgsched.backlog b
        WHERE b.partition_id = p AND b.ordering_id = p_name AND b.tick
    ) t;
    SELECT x.at, x.result INTO last_at, last_result FROM (
        (SELECT c.completed_at AS at, 'completed'::text AS result FROM pgsched.completions c
         WHERE c.partition_id = p AND c.ordering_id = p_name AND c.tick
         ORDER BY c.completed_at DESC LIMIT 1)
        UNION ALL
        (SELECT d.died_at, 'dead' FROM pgsched.dead_tasks d
         WHERE d.partition_id = p AND d.ordering_id = p_name AND d.tick
         ORDER BY d.died_at DESC LIMIT 1)
    ) x ORDER BY x.at DESC LIMIT 1;
END
$$;
