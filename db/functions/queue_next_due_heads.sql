-- queue_next_due_heads is queue_next_due's read of the idle heads in the
-- claim indexes when priorities or limits are in use: for each given
-- partition that has an idle queue, how many seconds until its earliest
-- one is due (negative: overdue), on the database's clock. One index probe
-- per partition (heads_due: its predicate is in the WHERE clause; paused
-- heads never wake a node), and one more (heads_due_prio) per non-zero
-- priority in use (priority_levels; none when it is empty).
CREATE OR REPLACE FUNCTION pgsched.queue_next_due_heads(p_partitions integer[])
RETURNS TABLE (partition_id integer, due_in float8)
LANGUAGE plpgsql STABLE
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT n.partition_id::integer, extract(epoch FROM least(n.next_at, n.next_prio) - now())::float8
    FROM (
        SELECT p.partition_id,
               (SELECT min(h.run_at) FROM pgsched.heads h
                WHERE h.partition_id = p.partition_id AND h.chain = 0 AND NOT h.paused AND h.priority = 0
                  AND NOT h.running) AS next_at,
               (SELECT min(x.at) FROM pgsched.priority_levels l
                CROSS JOIN LATERAL (SELECT min(h.run_at) AS at FROM pgsched.heads h
                                    WHERE h.partition_id = p.partition_id AND h.chain = 0 AND NOT h.paused
                                      AND h.priority <> 0 AND h.priority = l.priority AND NOT h.running) x) AS next_prio
        FROM unnest(p_partitions) AS p(partition_id)
    ) n
    WHERE n.next_at IS NOT NULL OR n.next_prio IS NOT NULL;
END
$$;
