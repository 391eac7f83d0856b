-- queue_next_due_limited on Citus: what db/functions/queue_next_due_limited.sql
-- does on one server (see there), run on the coordinator (the worker node
-- calls it beside the due reads delegated to the Citus workers), a kind at
-- a time: a kind's running tasks are counted in heads (see Citus's
-- claim_limited_kind), and its earliest parked head is one statement over
-- the shards of the given partitions, its shard queries on one
-- connection per Citus worker (as in Citus's claim_limited_kind).
CREATE OR REPLACE FUNCTION pgsched.queue_next_due_limited(p_partitions integer[])
RETURNS TABLE (partition_id integer, due_in float8)
LANGUAGE plpgsql STABLE
SET jit = off
SET citus.max_adaptive_executor_pool_size = 1
AS $$
#variable_conflict use_column
DECLARE
    l     pgsched.kind_limits;
    u     pgsched.limit_usage;
    ready timestamptz;
    p     integer;
    at    timestamptz;
BEGIN
    FOR l IN SELECT x.* FROM pgsched.kind_limits x
             WHERE NOT EXISTS (SELECT 1 FROM pgsched.paused_kinds k WHERE k.kind = x.kind) ORDER BY x.kind LOOP
        -- The earliest parked head first: a kind with none here costs one
        -- statement.
        SELECT h.partition_id, h.run_at INTO p, at FROM pgsched.heads h
        WHERE h.chain = -1 AND NOT h.paused AND h.kind = l.kind AND h.partition_id = ANY (p_partitions)
        ORDER BY h.run_at LIMIT 1;
        CONTINUE WHEN NOT FOUND;
        SELECT x.* INTO u FROM pgsched.limit_usage x WHERE x.kind = l.kind;
        IF l.max_running IS NOT NULL AND NOT l.per_group THEN
            SELECT count(*)::integer INTO u.running FROM pgsched.heads h WHERE h.chain = -2 AND h.running AND h.kind = l.kind;
        END IF;
        IF NOT l.per_group THEN
            ready := pgsched.limit_ready_at(l, u, now());
        ELSIF cardinality(pgsched.limit_groups(l.kind, NULL, p_partitions, 'infinity', 1, l, now())) > 0 THEN
            ready := now();
        ELSE
            SELECT min(o.at) INTO ready FROM pgsched.limit_group_usage g
            CROSS JOIN LATERAL (SELECT s + l.per AS at FROM unnest(g.starts) s WHERE s > now() - l.per
                                ORDER BY s DESC OFFSET greatest(coalesce(l.max_starts, 1) - 1, 0) LIMIT 1) o
            WHERE g.kind = l.kind AND l.max_starts IS NOT NULL;
        END IF;
        CONTINUE WHEN ready IS NULL;
        partition_id := p;
        due_in := extract(epoch FROM greatest(ready, at) - now())::float8;
        RETURN NEXT;
    END LOOP;
END
$$;
