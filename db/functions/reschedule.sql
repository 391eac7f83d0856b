-- reschedule moves a pending task to a new time in one step; a claimer sees
-- it either at its old time or at its new one. PGS01 naming the field if
-- the new time, or a key no task can have, is invalid, PGS02 if the new
-- time is in the past, PGS03 running, PGS04 not found, PGS05 if the new
-- key exists or was completed.
CREATE OR REPLACE FUNCTION pgsched.reschedule(ordering_id text, scheduled_at timestamptz, uniqueness_key text, new_scheduled_at timestamptz)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s pgsched.settings;
    p integer;
    uk text := coalesce(uniqueness_key, '');
    hd record;
    bad text;
BEGIN
    SELECT * INTO STRICT s FROM pgsched.settings;
    IF new_scheduled_at IS NULL OR NOT (new_scheduled_at > '0001-01-01 00:00:00+00' AND new_scheduled_at < '10000-01-01 00:00:00+00') THEN
        RAISE EXCEPTION USING MESSAGE = 'pgsched: ' || pgsched.time_error('new_scheduled_at', new_scheduled_at), ERRCODE = 'PGS01';
    END IF;
    IF new_scheduled_at < now() - s.grace THEN
        RAISE EXCEPTION 'pgsched: new_scheduled_at % is before now minus the grace window of %', new_scheduled_at, s.grace
            USING ERRCODE = 'PGS02';
    END IF;
    p := pgsched.partition_of(ordering_id, s.partition_count);
    SELECT * INTO hd FROM pgsched.lock_head(p, ordering_id);
    IF NOT FOUND THEN
        bad := pgsched.key_error(ordering_id, scheduled_at, uk);
        IF bad IS NOT NULL THEN
            RAISE EXCEPTION USING MESSAGE = 'pgsched: ' || bad, ERRCODE = 'PGS01';
        END IF;
        RAISE EXCEPTION 'pgsched: no pending task (%, %, %)', ordering_id, scheduled_at, uk USING ERRCODE = 'PGS04';
    END IF;
    IF hd.scheduled_at = reschedule.scheduled_at AND hd.uniqueness_key = uk AND hd.running THEN
        RAISE EXCEPTION 'pgsched: task (%, %, %) is running and cannot be rescheduled', ordering_id, scheduled_at, uk
            USING ERRCODE = 'PGS03';
    END IF;
    IF new_scheduled_at <> scheduled_at AND (
        (hd.scheduled_at = new_scheduled_at AND hd.uniqueness_key = uk)
        OR EXISTS (SELECT 1 FROM pgsched.backlog b WHERE b.partition_id = p AND b.ordering_id = reschedule.ordering_id
                   AND b.scheduled_at = new_scheduled_at AND b.uniqueness_key = uk)
        OR EXISTS (SELECT 1 FROM pgsched.completions c WHERE c.partition_id = p AND c.ordering_id = reschedule.ordering_id
                   AND c.scheduled_at = new_scheduled_at AND c.uniqueness_key = uk AND c.completed_at >= new_scheduled_at)) THEN
        RAISE EXCEPTION 'pgsched: a task (%, %, %) already exists or was completed', ordering_id, new_scheduled_at, uk
            USING ERRCODE = 'PGS05';
    END IF;
    IF hd.scheduled_at = reschedule.scheduled_at AND hd.uniqueness_key = uk THEN
        UPDATE pgsched.heads h SET scheduled_at = new_scheduled_at, run_at = new_scheduled_at
        WHERE h.partition_id = p AND h.ordering_id = reschedule.ordering_id;
    ELSE
        UPDATE pgsched.backlog b SET scheduled_at = new_scheduled_at, run_at = new_scheduled_at
        WHERE b.partition_id = p AND b.ordering_id = reschedule.ordering_id
          AND b.scheduled_at = reschedule.scheduled_at AND b.uniqueness_key = uk;
        IF NOT FOUND THEN
            bad := pgsched.key_error(ordering_id, scheduled_at, uk);
            IF bad IS NOT NULL THEN
                RAISE EXCEPTION USING MESSAGE = 'pgsched: ' || bad, ERRCODE = 'PGS01';
            END IF;
            RAISE EXCEPTION 'pgsched: no pending task (%, %, %)', ordering_id, scheduled_at, uk USING ERRCODE = 'PGS04';
        END IF;
    END IF;
    PERFORM pgsched.settle_heads(ARRAY[p], ARRAY[ordering_id]);
    IF new_scheduled_at <= now() + s.notify_horizon THEN
        PERFORM pg_notify('pgsched.due', '');
    END IF;
END
$$;
