-- limit_room is how many more tasks a kind's limit lets start at p_at:
-- max_running less those running under it, and max_starts less the starts
-- of the window (p_at - per, p_at]; a bound not set does not bound, nor
-- does either with per_group (each group has its own room then:
-- limit_group_room). Zero or less: none. p_usage may be NULL (nothing
-- counted yet).
CREATE OR REPLACE FUNCTION pgsched.limit_room(p_limit pgsched.kind_limits, p_usage pgsched.limit_usage, p_at timestamptz)
RETURNS integer
LANGUAGE sql
IMMUTABLE
AS $$
SELECT least(
    CASE WHEN p_limit.max_running IS NULL OR p_limit.per_group THEN 2147483647
         ELSE p_limit.max_running - coalesce(p_usage.running, 0) END,
    CASE WHEN p_limit.max_starts IS NULL OR p_limit.per_group THEN 2147483647
         ELSE p_limit.max_starts - (SELECT count(*) FROM unnest(p_usage.starts) s WHERE s > p_at - p_limit.per)::integer END)
$$;
