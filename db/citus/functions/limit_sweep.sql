-- limit_sweep on Citus: what db/functions/limit_sweep.sql does on one
-- server (see there), with the parked heads of kinds that have no limit
-- unparked partition by partition, and only when one statement over every
-- shard finds any (Citus refuses a locking statement over several
-- partitions, and a recursive query over a distributed table).
CREATE OR REPLACE FUNCTION pgsched.limit_sweep()
RETURNS integer
LANGUAGE plpgsql
SET jit = off
AS $$
DECLARE
    limited text[] := ARRAY(SELECT l.kind FROM pgsched.kind_limits l);
    changed integer := 0;
    n       integer;
    p       integer;
    stray   boolean;
    -- In a variable: Citus refuses a STABLE expression in a distributed write.
    v_soon  timestamptz := now() + interval '1 minute';
BEGIN
    PERFORM 1 FROM pgsched.heads h WHERE h.chain = -1 AND NOT h.paused AND h.kind <> ALL (limited) LIMIT 1;
    stray := FOUND;
    IF NOT stray AND cardinality(limited) = 0 THEN
        RETURN 0;
    END IF;
    FOR p IN SELECT generate_series(0, (SELECT s.partition_count - 1 FROM pgsched.settings s)) LOOP
        IF stray THEN
            UPDATE pgsched.heads h SET chain = 0
            FROM (SELECT x.ordering_id FROM pgsched.heads x
                  WHERE x.partition_id = p AND x.chain = -1 AND NOT x.paused AND x.kind <> ALL (limited)
                  LIMIT 10000 FOR UPDATE SKIP LOCKED) k
            WHERE h.partition_id = p AND h.ordering_id = k.ordering_id AND h.chain = -1 AND NOT h.running;
            GET DIAGNOSTICS n = ROW_COUNT;
            changed := changed + n;
        END IF;
        CONTINUE WHEN cardinality(limited) = 0;
        UPDATE pgsched.heads h SET chain = -1
        FROM (SELECT x.ordering_id FROM pgsched.heads x
              WHERE x.partition_id = p AND x.chain = 0 AND NOT x.paused
                AND x.run_at <= v_soon AND NOT x.running AND x.kind = ANY (limited)
              LIMIT 10000 FOR UPDATE SKIP LOCKED) k
        WHERE h.partition_id = p AND h.ordering_id = k.ordering_id AND h.chain = 0 AND NOT h.running;
        GET DIAGNOSTICS n = ROW_COUNT;
        changed := changed + n;
    END LOOP;
    IF changed > 0 THEN
        PERFORM pg_notify('pgsched.due', '');
    END IF;
    RETURN changed;
END
$$;
