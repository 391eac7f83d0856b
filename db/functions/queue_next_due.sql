-- queue_next_due returns, for each given partition that has an idle queue,
-- how many seconds until its earliest one is due (negative: overdue), on
-- the database's clock. One index probe per partition (heads_due: its
-- predicate is in the WHERE clause; paused heads never wake a node).
CREATE OR REPLACE FUNCTION pgsched.queue_next_due(p_partitions integer[])
RETURNS TABLE (partition_id integer, due_in float8)
LANGUAGE plpgsql STABLE
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
    IF EXISTS (SELECT 1 FROM pgsched.kind_limits) THEN
        RETURN QUERY SELECT * FROM pgsched.queue_next_due_limited(p_partitions);
        RETURN;
    END IF;
    RETURN QUERY
    SELECT n.partition_id::integer, extract(epoch FROM n.next_at - now())::float8
    FROM (
        SELECT p.partition_id,
               (SELECT min(h.run_at) FROM pgsched.heads h
                WHERE h.partition_id = p.partition_id AND h.chain = 0 AND NOT h.paused AND NOT h.running) AS next_at
        FROM unnest(p_partitions) AS p(partition_id)
    ) n
    WHERE n.next_at IS NOT NULL;
END
$$;
