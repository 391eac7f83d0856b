-- queue_next_due_on is queue_next_due for partitions that live on one
-- Citus worker, p_anchor among them, delegated to that worker on a schema
-- distributed over Citus (see claim_due_on and citus_delegate).
CREATE OR REPLACE FUNCTION pgsched.queue_next_due_on(p_anchor integer, p_partitions integer[])
RETURNS TABLE (partition_id integer, due_in float8)
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    RETURN QUERY SELECT * FROM pgsched.queue_next_due(p_partitions);
END
$$;
