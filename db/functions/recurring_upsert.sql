-- recurring_upsert creates or changes a recurring schedule and returns
-- 'inserted' or 'updated'. name is also the ordering_id of its ticks (the
-- same rules: 1..255 bytes). spec: see recurring_spec_error; time_zone: an
-- IANA name, UTC by default; missed: what happens to ticks that fell while
-- no node ran: 'skip' them, run 'one' catch-up (the default), or 'all'
-- (at most 100, the latest). Invalid input is refused naming the field
-- (SQLSTATE PGS01), with nothing stored: all that schedule_many would
-- refuse in a tick (kind and payload in its words), and zones other than
-- those every worker can load (see recurring_zone_ok). A change drops the
-- schedule's ticks not yet due, and ticks start again from the next after
-- now under the new definition. Any upsert, a change or not, takes a
-- schedule the leader set aside back (failing_since; see
-- internal/recurring): the next round tries it again.
CREATE OR REPLACE FUNCTION pgsched.recurring_upsert(name text, spec text, kind text DEFAULT 'default', payload jsonb DEFAULT '{}',
                                                    time_zone text DEFAULT 'UTC', missed text DEFAULT 'one')
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    msg  text;
    bad_spec text := pgsched.recurring_spec_error(spec);
    k    text := coalesce(nullif(kind, ''), 'default');
    pl   jsonb := coalesce(payload, '{}');
    tz   text := coalesce(nullif(time_zone, ''), 'UTC');
    mp   text := coalesce(nullif(missed, ''), 'one');
    old  pgsched.recurring_schedules;
BEGIN
    msg := CASE
        WHEN name IS NULL OR name = '' THEN 'name is required'
        WHEN octet_length(name) > 255 THEN format('name is %s bytes, over the limit of 255', octet_length(name))
        WHEN bad_spec IS NOT NULL THEN 'spec: ' || bad_spec
        WHEN tz ~ '[\x01-\x1f\x7f]' THEN 'time_zone contains a control character'
        WHEN NOT pgsched.recurring_zone_ok(tz) THEN format('time_zone "%s" is not an IANA time zone name', tz)
        WHEN mp NOT IN ('skip', 'one', 'all') THEN format('missed must be skip, one or all, got "%s"', mp)
        WHEN k ~ '[\x01-\x1f\x7f]' THEN 'kind contains a control character'
        WHEN octet_length(k) > 255 THEN format('kind is %s bytes, over the limit of 255', octet_length(k))
        WHEN pg_column_size(pl) > (SELECT s.max_payload_bytes FROM pgsched.settings s)
            THEN format('payload is %s bytes as stored (jsonb), over the limit of %s bytes', pg_column_size(pl),
                        (SELECT s.max_payload_bytes FROM pgsched.settings s))
        -- As schedule_many checks it (a smaller payload cannot nest so deep).
        WHEN pg_column_size(pl) >= 1016
             AND jsonb_path_exists(pl, 'strict $.**{126} ? (@.type() == "array" || @.type() == "object")')
            THEN 'payload is nested more than 126 levels deep'
    END;
    IF msg IS NOT NULL THEN
        RAISE EXCEPTION USING MESSAGE = 'pgsched: recurring schedule: ' || msg, ERRCODE = 'PGS01';
    END IF;
    SELECT * INTO old FROM pgsched.recurring_schedules r WHERE r.name = recurring_upsert.name FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO pgsched.recurring_schedules (name, spec, time_zone, kind, payload, missed)
        VALUES (name, btrim(spec), tz, k, pl, mp)
        ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN -- created meanwhile: update it as if it had been there
            RETURN pgsched.recurring_upsert(name, spec, kind, payload, time_zone, missed);
        END IF;
        RETURN 'inserted';
    END IF;
    IF (old.spec, old.time_zone, old.kind, old.payload, old.missed) IS DISTINCT FROM (btrim(spec), tz, k, pl, mp) THEN
        PERFORM pgsched.recurring_drop_ticks(name);
        UPDATE pgsched.recurring_schedules r
        SET spec = btrim(spec), time_zone = tz, kind = k, payload = pl, missed = mp, next_tick = NULL, updated_at = now(),
            failing_since = NULL, last_error = NULL, retry_at = NULL
        WHERE r.name = recurring_upsert.name;
    ELSIF old.failing_since IS NOT NULL THEN
        UPDATE pgsched.recurring_schedules r
        SET failing_since = NULL, last_error = NULL, retry_at = NULL, updated_at = now()
        WHERE r.name = recurring_upsert.name;
    END IF;
    RETURN 'updated';
END
$$;
