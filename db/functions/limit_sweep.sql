-- limit_sweep keeps parked heads (chain -1) in step with the limits, as
-- the leader's maintenance round runs it: heads are written parked when
-- their kind has a limit (schedule_many, settle_heads, finishes, rescues),
-- but a statement that had not yet seen a set_limit or clear_limit commit
-- may write one the other way. It unparks the parked heads of kinds that
-- have no limit, and parks the idle heads of limited kinds due within a
-- minute (claims skip those by kind until then), at most 10000 per
-- partition and statement, through the indexes claims use. Returns how
-- many heads changed.
CREATE OR REPLACE FUNCTION pgsched.limit_sweep()
RETURNS integer
LANGUAGE plpgsql
SET jit = off
AS $$
DECLARE
    limited text[] := ARRAY(SELECT l.kind FROM pgsched.kind_limits l);
    stray   text[];
    changed integer := 0;
    n       integer;
    p       integer;
BEGIN
    -- Kinds with parked heads, one index probe each (a loose scan of
    -- heads_limited_kind), less the limited ones.
    WITH RECURSIVE ks AS (
        (SELECT h.kind FROM pgsched.heads h WHERE h.chain = -1 AND NOT h.paused ORDER BY h.kind LIMIT 1)
        UNION ALL
        SELECT (SELECT h.kind FROM pgsched.heads h WHERE h.chain = -1 AND NOT h.paused AND h.kind > ks.kind ORDER BY h.kind LIMIT 1)
        FROM ks WHERE ks.kind IS NOT NULL
    )
    SELECT coalesce(array_agg(ks.kind), '{}') INTO stray FROM ks WHERE ks.kind IS NOT NULL AND ks.kind <> ALL (limited);
    IF cardinality(stray) > 0 THEN
        UPDATE pgsched.heads h SET chain = 0
        FROM (SELECT x.partition_id, x.ordering_id FROM pgsched.heads x
              WHERE x.chain = -1 AND NOT x.paused AND x.kind = ANY (stray)
              LIMIT 10000 FOR UPDATE SKIP LOCKED) k
        WHERE h.partition_id = k.partition_id AND h.ordering_id = k.ordering_id AND h.chain = -1 AND NOT h.running;
        GET DIAGNOSTICS n = ROW_COUNT;
        changed := changed + n;
    END IF;
    IF cardinality(limited) = 0 THEN
        RETURN changed;
    END IF;
    FOR p IN SELECT generate_series(0, (SELECT s.partition_count - 1 FROM pgsched.settings s)) LOOP
        UPDATE pgsched.heads h SET chain = -1
        FROM (SELECT x.ordering_id FROM pgsched.heads x
              WHERE x.partition_id = p AND x.chain = 0 AND NOT x.paused AND x.priority = 0
                AND x.run_at <= now() + interval '1 minute' AND NOT x.running AND x.kind = ANY (limited)
              LIMIT 10000 FOR UPDATE SKIP LOCKED) k
        WHERE h.partition_id = p AND h.ordering_id = k.ordering_id AND h.chain = 0 AND NOT h.running;
        GET DIAGNOSTICS n = ROW_COUNT;
        changed := changed + n;
        UPDATE pgsched.heads h SET chain = -1
        FROM (SELECT x.ordering_id FROM pgsched.heads x
              WHERE x.partition_id = p AND x.chain = 0 AND NOT x.paused AND x.priority <> 0
                AND x.run_at <= now() + interval '1 minute' AND NOT x.running AND x.kind = ANY (limited)
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
