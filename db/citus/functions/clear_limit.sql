-- clear_limit on Citus: what db/functions/clear_limit.sql does on one
-- server (see there), with the parked heads unparked partition by
-- partition (Citus refuses a locking statement over several partitions).
-- The usage rows go whatever still runs: on Citus running tasks are
-- counted in heads, so a limit set again counts them anyway.
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
    DELETE FROM pgsched.limit_usage u WHERE u.kind = clear_limit.kind;
    DELETE FROM pgsched.limit_group_usage g WHERE g.kind = clear_limit.kind;
    FOR p IN SELECT generate_series(0, (SELECT s.partition_count - 1 FROM pgsched.settings s)) LOOP
        UPDATE pgsched.heads h SET chain = 0
        FROM (SELECT x.ordering_id FROM pgsched.heads x
              WHERE x.partition_id = p AND x.chain = -1 AND x.kind = clear_limit.kind
              ORDER BY x.ordering_id
              FOR UPDATE) k
        WHERE h.partition_id = p AND h.ordering_id = k.ordering_id AND h.chain = -1;
    END LOOP;
    PERFORM pg_notify('pgsched.due', '');
    RETURN was;
END
$$;
