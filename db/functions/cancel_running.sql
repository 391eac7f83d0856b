-- cancel_running asks the node running a task to cancel its handler's
-- context; the task then ends as dead with the reason "cancelled", never
-- retried (the node records it so whatever the handler returns, unless it
-- completed). Returns true when the request is new, false when the task
-- was already asked to cancel. PGS04 when the key is not running (a
-- pending task is cancelled with pgsched.cancel), PGS01 naming the field
-- when no task can have that key.
CREATE OR REPLACE FUNCTION pgsched.cancel_running(ordering_id text, scheduled_at timestamptz, uniqueness_key text DEFAULT '')
RETURNS boolean
LANGUAGE plpgsql
SET jit = off
AS $$
DECLARE
    p  integer := pgsched.partition_of(ordering_id, (SELECT partition_count FROM pgsched.settings));
    uk text := coalesce(uniqueness_key, '');
    h  record;
    bad text;
BEGIN
    SELECT x.id, x.running INTO h FROM pgsched.heads x
    WHERE x.partition_id = p AND x.ordering_id = cancel_running.ordering_id
      AND x.scheduled_at = cancel_running.scheduled_at AND x.uniqueness_key = uk;
    IF NOT FOUND OR NOT h.running THEN
        bad := pgsched.key_error(ordering_id, scheduled_at, uk);
        IF bad IS NOT NULL THEN
            RAISE EXCEPTION USING MESSAGE = 'pgsched: ' || bad, ERRCODE = 'PGS01';
        END IF;
        RAISE EXCEPTION 'pgsched: task (%, %, %) is not running (pgsched.cancel removes a pending task)',
            ordering_id, scheduled_at, uk USING ERRCODE = 'PGS04';
    END IF;
    INSERT INTO pgsched.cancel_requests (task_id, partition_id, ordering_id)
    VALUES (h.id, p, cancel_running.ordering_id)
    ON CONFLICT (task_id) DO NOTHING;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM pg_notify('pgsched.cancel', h.id::text);
    RETURN true;
END
$$;
