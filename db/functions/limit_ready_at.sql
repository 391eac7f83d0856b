-- limit_ready_at is when a kind's limit next lets a task start, as seen at
-- p_at: p_at when it does now; NULL when only a finish can make room (the
-- kind runs max_running); else when the max_starts-th latest start leaves
-- the window. plpgsql, not sql: its body is not checked when it is
-- created, which Citus does on the workers in creation order, before
-- limit_room exists there.
CREATE OR REPLACE FUNCTION pgsched.limit_ready_at(p_limit pgsched.kind_limits, p_usage pgsched.limit_usage, p_at timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql
IMMUTABLE
AS $$
BEGIN
    RETURN CASE
        WHEN pgsched.limit_room(p_limit, p_usage, p_at) > 0 THEN p_at
        WHEN p_limit.max_running IS NOT NULL AND coalesce(p_usage.running, 0) >= p_limit.max_running THEN NULL
        ELSE (SELECT s + p_limit.per FROM unnest(p_usage.starts) s WHERE s > p_at - p_limit.per
              ORDER BY s DESC OFFSET greatest(coalesce(p_limit.max_starts, 1) - 1, 0) LIMIT 1)
    END;
END
$$;
