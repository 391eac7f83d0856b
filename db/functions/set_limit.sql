-- set_limit limits a kind, cluster-wide: at most max_running of its tasks
-- running at once, and at most max_starts of them started in any window
-- of length per (both, or either). Setting it again replaces it. A task
-- held back waits as it is, its attempt unused, and starts when the limit
-- allows. Tasks already running when a limit is first set are not counted
-- by it: until they end, more may run than max_running. PGS01 for a bad
-- argument. Returns true when the kind had no limit before.
CREATE OR REPLACE FUNCTION pgsched.set_limit(kind text, max_running integer DEFAULT NULL, max_starts integer DEFAULT NULL,
                                  per interval DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql
SET jit = off
AS $$
DECLARE
    fresh boolean;
    err   text := pgsched.limit_error(kind, max_running, max_starts, per);
BEGIN
    IF err IS NOT NULL THEN
        RAISE EXCEPTION USING MESSAGE = err, ERRCODE = 'PGS01';
    END IF;
    fresh := NOT EXISTS (SELECT 1 FROM pgsched.kind_limits l WHERE l.kind = set_limit.kind);
    INSERT INTO pgsched.kind_limits AS l (kind, max_running, max_starts, per)
    VALUES (set_limit.kind, set_limit.max_running, set_limit.max_starts, set_limit.per)
    ON CONFLICT ON CONSTRAINT kind_limits_pkey DO UPDATE
    SET max_running = excluded.max_running, max_starts = excluded.max_starts, per = excluded.per, updated_at = excluded.updated_at;
    INSERT INTO pgsched.limit_usage AS u (kind) VALUES (set_limit.kind) ON CONFLICT ON CONSTRAINT limit_usage_pkey DO NOTHING;
    -- Raising a limit may let parked tasks start.
    PERFORM pg_notify('pgsched.due', '');
    RETURN fresh;
END
$$;
