-- recurring_pause stops a schedule: its ticks not yet due are dropped and
-- none is created until recurring_resume. Returns true when it was not
-- paused; PGS04 when there is no such schedule.
CREATE OR REPLACE FUNCTION pgsched.recurring_pause(name text)
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
    PERFORM pgsched.recurring_drop_ticks(name);
    UPDATE pgsched.recurring_schedules r SET paused = true, next_tick = NULL, updated_at = now() WHERE r.name = name;
    RETURN NOT was;
END
$$;
