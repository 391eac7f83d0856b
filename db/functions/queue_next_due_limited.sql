-- queue_next_due_limited is queue_next_due's read of parked heads (chain
-- -1) while some kind has a limit: a partition is due when it holds the
-- earliest parked head of a limited kind whose limit has room, from when
-- it has: at once, or when its rate window next lets a task start. A kind running max_running
-- tasks makes nothing due: the finish that frees a place notifies the
-- nodes (limit_release). With a per-group limit, the kind has room while
-- one of its groups with parked heads has (limit_groups, which stops at
-- the first); else it has from when the first group's rate window next
-- lets a task start.
CREATE OR REPLACE FUNCTION pgsched.queue_next_due_limited(p_partitions integer[])
RETURNS TABLE (partition_id integer, due_in float8)
LANGUAGE plpgsql STABLE
SET jit = off
-- Planned once: a custom plan for the arrays of each call took longer than
-- running it (0.6 ms a call against 0.2, at 200 calls a second).
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    kinds text[];
    ready timestamptz[];
BEGIN
    -- Once per call: which limited kinds could start a task, from when.
    SELECT coalesce(array_agg(r.kind), '{}'), coalesce(array_agg(r.ready_at), '{}') INTO kinds, ready
    FROM (
        SELECT l.kind,
               CASE WHEN NOT l.per_group THEN pgsched.limit_ready_at(l, u, now())
                    WHEN cardinality(pgsched.limit_groups(l.kind, NULL, p_partitions, 'infinity', 1, l, now())) > 0 THEN now()
                    ELSE (SELECT min(o.at) FROM pgsched.limit_group_usage g
                          CROSS JOIN LATERAL (SELECT s + l.per AS at FROM unnest(g.starts) s WHERE s > now() - l.per
                                              ORDER BY s DESC OFFSET greatest(coalesce(l.max_starts, 1) - 1, 0) LIMIT 1) o
                          WHERE g.kind = l.kind AND l.max_starts IS NOT NULL) END AS ready_at
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
