-- queue_next_due returns, for each given partition that has an idle queue,
-- how many seconds until its earliest one is due (negative: overdue), on
-- the database's clock. One index probe per partition (heads_due: its
-- predicate is in the WHERE clause; paused heads never wake a node), and
-- one more (heads_due_prio) per non-zero priority in use (priority_levels).
CREATE OR REPLACE FUNCTION pgsched.queue_next_due(p_partitions integer[])
RETURNS TABLE (partition_id integer, due_in float8)
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_custom_plan
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    p        integer;
    lv       integer;
    v_levels integer[];
    at       timestamptz;
    at_lv    timestamptz;
BEGIN
    SELECT array_agg(l.priority) INTO v_levels FROM pgsched.priority_levels l;
    -- Citus: a statement per partition (a subquery per element of a
    -- list of partitions spans shards).
    FOREACH p IN ARRAY p_partitions LOOP
        IF v_levels IS NULL THEN
            RETURN QUERY
            SELECT p, extract(epoch FROM min(h.run_at) - now())::float8 FROM pgsched.heads h
            WHERE h.partition_id = p AND h.chain = 0 AND NOT h.paused AND h.priority = 0 AND NOT h.running
            HAVING min(h.run_at) IS NOT NULL;
            CONTINUE;
        END IF;
        SELECT min(h.run_at) INTO at FROM pgsched.heads h
        WHERE h.partition_id = p AND h.chain = 0 AND NOT h.paused AND h.priority = 0 AND NOT h.running;
        FOREACH lv IN ARRAY v_levels LOOP
            SELECT min(h.run_at) INTO at_lv FROM pgsched.heads h
            WHERE h.partition_id = p AND h.chain = 0 AND NOT h.paused AND h.priority = lv AND NOT h.running;
            at := least(at, at_lv);
        END LOOP;
        IF at IS NOT NULL THEN
            partition_id := p;
            due_in := extract(epoch FROM at - now())::float8;
            RETURN NEXT;
        END IF;
    END LOOP;
END
$$;
