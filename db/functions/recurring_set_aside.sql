-- recurring_set_aside sets aside the schedules whose ticks the leader
-- could not create (see internal/recurring), each with its error, unless
-- an upsert, pause or resume changed it since the leader read it
-- (p_updated_ats, its updated_at then). The leader leaves a set-aside
-- schedule out of its pick until retry_at: after as long as it has been
-- failing, at least p_min_seconds and at most p_max_seconds, so one that
-- keeps failing is tried at doubling intervals. Returns each schedule set
-- aside and whether it is new to it (failing since now), which the leader
-- logs, once.
--
-- One UPDATE per schedule, by its key and with the time in a variable:
-- on Citus, where recurring_schedules is a reference table, each is then
-- a plain modification of one row, which Citus runs on every node.
CREATE OR REPLACE FUNCTION pgsched.recurring_set_aside(p_names text[], p_updated_ats timestamptz[], p_errors text[],
                                                       p_min_seconds float8, p_max_seconds float8)
RETURNS TABLE (schedule text, newly boolean, retry_at timestamptz)
LANGUAGE plpgsql
AS $$
DECLARE
    t_now timestamptz := now();
    lo    interval := make_interval(secs => p_min_seconds);
    hi    interval := make_interval(secs => p_max_seconds);
    f     record;
    since timestamptz;
BEGIN
    FOR f IN SELECT x.name, x.updated_at, x.error FROM unnest(p_names, p_updated_ats, p_errors) AS x(name, updated_at, error)
             ORDER BY x.name
    LOOP
        UPDATE pgsched.recurring_schedules r
        SET failing_since = coalesce(r.failing_since, t_now), last_error = f.error,
            retry_at = t_now + least(greatest(t_now - coalesce(r.failing_since, t_now), lo), hi)
        WHERE r.name = f.name AND r.updated_at = f.updated_at AND NOT r.paused
        RETURNING r.failing_since, r.retry_at INTO since, retry_at;
        IF FOUND THEN
            schedule := f.name;
            newly := since = t_now;
            RETURN NEXT;
        END IF;
    END LOOP;
END
$$;
