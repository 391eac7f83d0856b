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
BEGIN
    IF kind IS NULL OR kind = '' THEN
        RAISE EXCEPTION USING MESSAGE = 'pgsched: kind is required', ERRCODE = 'PGS01';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('pgsched.kind_limits'));
    DELETE FROM pgsched.kind_limits l WHERE l.kind = clear_limit.kind;
    was := FOUND;
    DELETE FROM pgsched.limit_usage u WHERE u.kind = clear_limit.kind AND u.running = 0;
    DELETE FROM pgsched.limit_group_usage g WHERE g.kind = clear_limit.kind AND g.running = 0;
    -- Parked heads (paused ones too) back to idle, locked in key order as
    -- enqueuers lock them; one statement over every partition, as limits
    -- are single-server (the Citus build refuses set_limit).
    UPDATE pgsched.heads h SET chain = 0
    FROM (SELECT x.partition_id, x.ordering_id FROM pgsched.heads x
          WHERE x.chain = -1 AND x.kind = clear_limit.kind
          ORDER BY x.partition_id, x.ordering_id
          FOR UPDATE) k
    WHERE h.partition_id = k.partition_id AND h.ordering_id = k.ordering_id AND h.chain = -1;
    PERFORM pg_notify('pgsched.due', '');
    RETURN was;
END
$$;
