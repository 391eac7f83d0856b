-- queue_next_due returns, for each given partition that has an idle queue,
-- how many seconds until its earliest one is due (negative: overdue), on
-- the database's clock: the heads in the claim index, and, while a kind
-- has a limit, the parked heads of limited kinds when their limit will
-- have room (queue_next_due_limited). One index probe per partition
-- (heads_due: its predicate is in the WHERE clause; paused heads never
-- wake a node); with priorities in use, queue_next_due_heads adds one per
-- priority. A node calls it whenever it must look for due work, so the
-- common case (no priority, no limit) runs its statement here, without a
-- function call and a copy of its rows between. Generic plans from the
-- first call: planning the probes of 64 partitions takes twice as long as
-- running them, and a connection calls this only a few times.
CREATE OR REPLACE FUNCTION pgsched.queue_next_due(p_partitions integer[])
RETURNS TABLE (partition_id integer, due_in float8)
LANGUAGE plpgsql STABLE
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pgsched.kind_limits) THEN
        IF NOT EXISTS (SELECT 1 FROM pgsched.priority_levels) THEN
            RETURN QUERY
            SELECT n.partition_id::integer, extract(epoch FROM n.next_at - now())::float8
            FROM (
                SELECT p.partition_id,
                       (SELECT min(h.run_at) FROM pgsched.heads h
                        WHERE h.partition_id = p.partition_id AND h.chain = 0 AND NOT h.paused AND h.priority = 0
                          AND NOT h.running) AS next_at
                FROM unnest(p_partitions) AS p(partition_id)
            ) n
            WHERE n.next_at IS NOT NULL;
            RETURN;
        END IF;
        RETURN QUERY SELECT * FROM pgsched.queue_next_due_heads(p_partitions);
        RETURN;
    END IF;
    RETURN QUERY
    SELECT x.partition_id, min(x.due_in)::float8
    FROM (SELECT * FROM pgsched.queue_next_due_heads(p_partitions)
          UNION ALL
          SELECT * FROM pgsched.queue_next_due_limited(p_partitions)) x
    GROUP BY x.partition_id;
END
$$;
