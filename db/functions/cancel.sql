-- cancel removes a pending task. PGS03 if it is running, PGS04 if there is no
-- such pending task, PGS01 naming the field if no task can have that key.
CREATE OR REPLACE FUNCTION pgsched.cancel(ordering_id text, scheduled_at timestamptz, uniqueness_key text DEFAULT '')
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p integer := pgsched.partition_of(ordering_id, (SELECT partition_count FROM pgsched.settings));
    uk text := coalesce(uniqueness_key, '');
    hd record;
    bad text;
BEGIN
    SELECT * INTO hd FROM pgsched.lock_head(p, ordering_id);
    IF FOUND AND hd.scheduled_at = cancel.scheduled_at AND hd.uniqueness_key = uk THEN
        IF hd.running THEN
            RAISE EXCEPTION 'pgsched: task (%, %, %) is running and cannot be cancelled',
                ordering_id, scheduled_at, uk USING ERRCODE = 'PGS03';
        END IF;
        DELETE FROM pgsched.heads h WHERE h.partition_id = p AND h.ordering_id = cancel.ordering_id;
        PERFORM pgsched.settle_heads(ARRAY[p], ARRAY[ordering_id]);
        RETURN;
    END IF;
    IF FOUND THEN
        DELETE FROM pgsched.backlog b
        WHERE b.partition_id = p AND b.ordering_id = cancel.ordering_id
          AND b.scheduled_at = cancel.scheduled_at AND b.uniqueness_key = uk;
    END IF;
    IF NOT FOUND THEN
        bad := pgsched.key_error(ordering_id, scheduled_at, uk);
        IF bad IS NOT NULL THEN
            RAISE EXCEPTION USING MESSAGE = 'pgsched: ' || bad, ERRCODE = 'PGS01';
        END IF;
        RAISE EXCEPTION 'pgsched: no pending task (%, %, %)', ordering_id, scheduled_at, uk
            USING ERRCODE = 'PGS04';
    END IF;
END
$$;
