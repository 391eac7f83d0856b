-- limit_group_room is how many more tasks of one group a per-group limit
-- (per_group) lets start at p_at: max_running less the group's tasks
-- running under it, and max_starts less the group's starts of the window
-- (p_at - per, p_at]; a bound not set does not bound. Zero or less: none.
-- p_usage may be NULL (the group has not run yet).
CREATE OR REPLACE FUNCTION pgsched.limit_group_room(p_limit pgsched.kind_limits, p_usage pgsched.limit_group_usage,
                                         p_at timestamptz)
RETURNS integer
LANGUAGE sql
IMMUTABLE
AS $$
SELECT least(
    CASE WHEN p_limit.max_running IS NULL THEN 2147483647
         ELSE p_limit.max_running - coalesce(p_usage.running, 0) END,
    CASE WHEN p_limit.max_starts IS NULL THEN 2147483647
         ELSE p_limit.max_starts - (SELECT count(*) FROM unnest(p_usage.starts) s WHERE s > p_at - p_limit.per)::integer END)
$$;
