-- set_limit limits a kind, cluster-wide: at most max_running of its tasks
-- running at once, and at most max_starts of them started in any window
-- of length per (both, or either). With per_group, both bound each group
-- (group_key; tasks without one are a group) apart. Setting it again
-- replaces it. A task
-- held back waits as it is, its attempt unused, and starts when the limit
-- allows. Tasks already running when a limit is first set are not counted
-- by it: until they end, more may run than max_running. PGS01 for a bad
-- argument. Returns true when the kind had no limit before.
CREATE OR REPLACE FUNCTION pgsched.set_limit(kind text, max_running integer DEFAULT NULL, max_starts integer DEFAULT NULL,
                                  per interval DEFAULT NULL, per_group boolean DEFAULT false)
RETURNS boolean
LANGUAGE plpgsql
SET jit = off
AS $$
DECLARE
    p     integer;
    fresh boolean;
    err   text := pgsched.limit_error(kind, max_running, max_starts, per, coalesce(per_group, false));
BEGIN
    IF err IS NOT NULL THEN
        RAISE EXCEPTION USING MESSAGE = err, ERRCODE = 'PGS01';
    END IF;
    fresh := NOT EXISTS (SELECT 1 FROM pgsched.kind_limits l WHERE l.kind = set_limit.kind);
    INSERT INTO pgsched.kind_limits AS l (kind, max_running, max_starts, per, per_group)
    VALUES (set_limit.kind, set_limit.max_running, set_limit.max_starts, set_limit.per, coalesce(set_limit.per_group, false))
    ON CONFLICT ON CONSTRAINT kind_limits_pkey DO UPDATE
    SET max_running = excluded.max_running, max_starts = excluded.max_starts, per = excluded.per, per_group = excluded.per_group,
        updated_at = excluded.updated_at;
    INSERT INTO pgsched.limit_usage AS u (kind) VALUES (set_limit.kind) ON CONFLICT ON CONSTRAINT limit_usage_pkey DO NOTHING;
    IF fresh THEN
        -- The kind's idle heads are parked, partition by partition; heads
        -- written meanwhile by a statement that had not seen the limit are
        -- parked by the leader's sweep (limit_sweep) and skipped by claims
        -- until then.
        FOR p IN SELECT generate_series(0, (SELECT s.partition_count - 1 FROM pgsched.settings s)) LOOP
            UPDATE pgsched.heads h SET chain = -1
            FROM (SELECT x.ordering_id FROM pgsched.heads x
                  WHERE x.partition_id = p AND x.chain = 0 AND x.kind = set_limit.kind AND NOT x.running
                  ORDER BY x.ordering_id
                  FOR UPDATE) k
            WHERE h.partition_id = p AND h.ordering_id = k.ordering_id AND h.chain = 0 AND NOT h.running;
        END LOOP;
    END IF;
    -- Raising a limit may let parked tasks start.
    PERFORM pg_notify('pgsched.due', '');
    RETURN fresh;
END
$$;
