-- recurring_resume starts a paused schedule again from its next tick after
-- now (ticks that fell while it was paused are not caught up: that is what
-- pausing is for), and takes it back if the leader had set it aside
-- (failing_since). Returns true when it was paused; PGS04 when there is no
-- such schedule.
CREATE OR REPLACE FUNCTION pgsched.recurring_resume(name text)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    was boolean;
BEGIN
    SELECT r.paused INTO was FROM pgsched.recurring_schedules r WHERE r.name = name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgsched: no recurring schedule %', name USING ERRCODE = 'PGS04';
    END IF;
    UPDATE pgsched.recurring_schedules r
    SET paused = false, next_tick = NULL, updated_at = now(), failing_since = NULL, last_error = NULL, retry_at = NULL
    WHERE r.name = name;
    RETURN was;
END
$$;
