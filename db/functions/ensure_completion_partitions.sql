-- ensure_completion_partitions creates the daily completion partitions from
-- the day of at up to days_ahead days later and drops those wholly older than
-- the retention window. Safe to call concurrently and repeatedly.
CREATE OR REPLACE FUNCTION pgsched.ensure_completion_partitions(at timestamptz, days_ahead integer)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    retention interval := (SELECT completion_retention FROM pgsched.settings);
    day date;
    name text;
    dropped integer := 0;
    r record;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('pgsched.completions'));
    FOR i IN 0 .. days_ahead LOOP
        day := (at AT TIME ZONE 'UTC')::date + i;
        name := 'completions_' || to_char(day, 'YYYYMMDD');
        IF to_regclass('pgsched.' || name) IS NULL THEN
            EXECUTE format('CREATE TABLE pgsched.%I PARTITION OF pgsched.completions FOR VALUES FROM (%L) TO (%L)',
                name, (day::timestamp AT TIME ZONE 'UTC'), ((day + 1)::timestamp AT TIME ZONE 'UTC'));
        END IF;
    END LOOP;
    FOR r IN
        SELECT c.relname FROM pg_inherits i
        JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'pgsched.completions'::regclass
          AND c.relname ~ '^completions_[0-9]{8}$'
          AND ((to_date(substr(c.relname, 13), 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC') < at - retention
    LOOP
        EXECUTE format('DROP TABLE pgsched.%I', r.relname);
        dropped := dropped + 1;
    END LOOP;
    RETURN dropped;
END
$$;
