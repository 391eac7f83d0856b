-- clear_limit removes a kind's limit: its parked tasks go back to the
-- claims' index and run as any other. It takes the limits lock, so it
-- waits for claims under way (which may be parking the kind's heads) and
-- later claims park none. Usage rows of tasks still running stay until
-- they end, so setting the limit again counts them. Returns whether the
-- kind had a limit.
CREATE OR REPLACE FUNCTION pgsched.clear_limit(kind text)
RETURNS boolean
LANGUAGE plpgsql
SET jit = off
AS $$
DECLARE
    was boolean;
    p   integer;
BEGIN
    IF kind IS NULL OR kind = '' THEN
        RAISE EXCEPTION USING MESSAGE = 'pgsched: kind is required', ERRCODE = 'PGS01';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('pgsched.kind_limits'));
    DELETE FROM pgsched.kind_limits l WHERE l.kind = clear_limit.kind;
    was := FOUND;
    DELETE FROM pgsched.limit_usage u WHERE u.kind = clear_limit.kind AND u.running = 0;
    -- Partition by partition, parked heads (paused ones too) back to idle.
    FOR p IN SELECT generate_series(0, (SELECT s.partition_count - 1 FROM pgsched.settings s)) LOOP
        UPDATE pgsched.heads h SET chain = 0
        FROM (SELECT x.ordering_id FROM pgsched.heads x
              WHERE x.partition_id = p AND x.chain = -1 AND x.kind = clear_limit.kind AND NOT x.running
              ORDER BY x.ordering_id
              FOR UPDATE) k
        WHERE h.partition_id = p AND h.ordering_id = k.ordering_id AND h.chain = -1 AND NOT h.running;
    END LOOP;
    PERFORM pg_notify('pgsched.due', '');
    RETURN was;
END
$$;
