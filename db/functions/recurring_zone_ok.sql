-- recurring_zone_ok reports whether tz names a time zone of the IANA
-- database, spelled exactly (as Go's time.LoadLocation finds it on Linux):
-- UTC at once, any other name by the server's list of zone names, which
-- reads the zone files, a few milliseconds (AT TIME ZONE would be quicker,
-- but it ignores case and takes abbreviations such as CEST, which are not
-- zones). Only a schedule's upsert calls it.
CREATE OR REPLACE FUNCTION pgsched.recurring_zone_ok(tz text)
RETURNS boolean
LANGUAGE sql
STABLE
AS $$
    SELECT tz = 'UTC' OR (tz <> 'Local' AND EXISTS (SELECT 1 FROM pg_timezone_names z WHERE z.name = tz));
$$;
