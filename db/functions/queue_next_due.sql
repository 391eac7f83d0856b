-- queue_next_due returns, for each given partition that has an idle queue,
-- how many seconds until its earliest one is due (negative: overdue), on
-- the database's clock: the heads in the claim index
-- (queue_next_due_heads), and, while a kind has a limit, the parked heads
-- of limited kinds when their limit will have room
-- (queue_next_due_limited).
CREATE OR REPLACE FUNCTION pgsched.queue_next_due(p_partitions integer[])
RETURNS TABLE (partition_id integer, due_in float8)
LANGUAGE plpgsql STABLE
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pgsched.kind_limits) THEN
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
