-- queue_next_due_limited is queue_next_due's read of parked heads (chain
-- -1) while some kind has a limit: a partition is due when it holds the
-- earliest parked head of a limited kind whose limit has room, from when
-- it has: at once, or when its rate window next lets a task start. A kind running max_running
-- tasks makes nothing due: the finish that frees a place notifies the
-- nodes (limit_release).
CREATE OR REPLACE FUNCTION pgsched.queue_next_due_limited(p_partitions integer[])
RETURNS TABLE (partition_id integer, due_in float8)
LANGUAGE plpgsql STABLE
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    kinds text[];
    ready timestamptz[];
BEGIN
    -- Once per call: which limited kinds could start a task, from when.
    SELECT coalesce(array_agg(r.kind), '{}'), coalesce(array_agg(r.ready_at), '{}') INTO kinds, ready
    FROM (
        SELECT l.kind, pgsched.limit_ready_at(l, u, now()) AS ready_at
        FROM pgsched.kind_limits l LEFT JOIN pgsched.limit_usage u ON u.kind = l.kind
        WHERE NOT EXISTS (SELECT 1 FROM pgsched.paused_kinds k WHERE k.kind = l.kind)
    ) r
    WHERE r.ready_at IS NOT NULL;
    -- One probe per ready kind (heads_limited_kind): the partition of its
    -- earliest parked head among these. A claim takes the kind's parked
    -- heads from every partition the node serves, so one is enough.
    RETURN QUERY
    SELECT x.partition_id::integer, extract(epoch FROM greatest(r.ready_at, x.run_at) - now())::float8
    FROM unnest(kinds, ready) AS r(kind, ready_at)
    CROSS JOIN LATERAL (
        SELECT h.partition_id, h.run_at FROM pgsched.heads h
        WHERE h.chain = -1 AND NOT h.paused AND h.kind = r.kind AND h.partition_id = ANY (p_partitions)
        ORDER BY h.run_at LIMIT 1
    ) x;
END
$$;
