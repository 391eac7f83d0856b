-- limit_error says what is wrong with set_limit's arguments, in the words
-- the Go client uses (pgsched.Limit's checks), or NULL when nothing is.
CREATE OR REPLACE FUNCTION pgsched.limit_error(p_kind text, p_max_running integer, p_max_starts integer, p_per interval,
                                    p_per_group boolean DEFAULT false)
RETURNS text
LANGUAGE sql
STABLE
AS $$
SELECT CASE
    WHEN p_kind IS NULL OR p_kind = '' THEN 'pgsched: kind is required'
    WHEN octet_length(p_kind) > 255 THEN format('pgsched: kind is %s bytes, over the limit of 255', octet_length(p_kind))
    WHEN p_max_running IS NULL AND p_max_starts IS NULL THEN 'pgsched: a limit needs max_running, or max_starts with per'
    WHEN p_max_running < 1 THEN format('pgsched: max_running must be at least 1, got %s', p_max_running)
    WHEN (p_max_starts IS NULL) <> (p_per IS NULL) THEN 'pgsched: max_starts and per go together'
    WHEN p_max_starts < 1 OR p_max_starts > 10000 THEN format('pgsched: max_starts must be from 1 to 10000, got %s', p_max_starts)
    WHEN p_per <= interval '0' THEN format('pgsched: per must be positive, got %s seconds', trim_scale(extract(epoch FROM p_per)))
    WHEN p_per > interval '1 day' THEN format('pgsched: per must be at most a day, got %s seconds', trim_scale(extract(epoch FROM p_per)))
END
$$;
