-- recurring_delete removes a schedule and its ticks not yet due (a tick
-- running or due now finishes). Returns true when there was one.
CREATE OR REPLACE FUNCTION pgsched.recurring_delete(name text)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    DELETE FROM pgsched.recurring_schedules r WHERE r.name = name;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM pgsched.recurring_drop_ticks(name);
    RETURN true;
END
$$;
