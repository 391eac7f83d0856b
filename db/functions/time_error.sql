-- time_error says why at cannot be a task's time, naming field, in the
-- words the Go client uses; NULL when it can (being in the past is
-- checked apart, against the grace window). 0001-01-01 00:00:00 UTC, the
-- one instant of the range it refuses, is Go's zero time: what a Go
-- program that never set the time sends, so it is "required", from Go
-- and from SQL alike, rather than far in the past.
CREATE OR REPLACE FUNCTION pgsched.time_error(field text, at timestamptz)
RETURNS text
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE
        WHEN at IS NULL THEN field || ' is required'
        WHEN at IN ('infinity', '-infinity') THEN field || ' must be a finite time'
        WHEN at = '0001-01-01 00:00:00+00'
            THEN field || ' is required: 0001-01-01 00:00:00 UTC is Go''s zero time, taken as unset'
        WHEN at < '0001-01-01 00:00:00+00' OR at >= '10000-01-01 00:00:00+00'
            THEN field || ' is outside the supported range 0001-01-01 00:00:00 to 9999-12-31 23:59:59.999999 UTC'
    END
$$;
