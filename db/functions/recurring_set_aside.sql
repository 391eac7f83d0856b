-- recurring_set_aside sets aside the schedules whose ticks the leader
-- could not create (see internal/recurring), each with its error, unless
-- an upsert, pause or resume changed it since the leader read it
-- (p_updated_ats, its updated_at then). The leader leaves a set-aside
-- schedule out of its pick until retry_at: after as long as it has been
-- failing, at least p_min_seconds and at most p_max_seconds, so one that
-- keeps failing is tried at doubling intervals. Returns each schedule set aside
-- and whether it is new to it (failing since now: an earlier statement
-- set another time), which the leader logs, once.
CREATE OR REPLACE FUNCTION pgsched.recurring_set_aside(p_names text[], p_updated_ats timestamptz[], p_errors text[],
                                                       p_min_seconds float8, p_max_seconds float8)
RETURNS TABLE (schedule text, newly boolean, retry_at timestamptz)
LANGUAGE sql
AS $$
    UPDATE pgsched.recurring_schedules r
    SET failing_since = coalesce(r.failing_since, now()), last_error = f.error,
        retry_at = now() + least(greatest(now() - coalesce(r.failing_since, now()), make_interval(secs => p_min_seconds)),
                              make_interval(secs => p_max_seconds))
    FROM unnest(p_names, p_updated_ats, p_errors) AS f(name, updated_at, error)
    WHERE r.name = f.name AND r.updated_at = f.updated_at AND NOT r.paused
    RETURNING r.name, r.failing_since = now(), r.retry_at;
$$;
