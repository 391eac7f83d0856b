-- pause_sweep marks the heads of paused kinds written since the kind was
-- paused (enqueued, promoted, given back), so they leave the claim index
-- too; claims skip them by kind meanwhile, so this is upkeep, not
-- correctness. Only heads due within a minute are looked at (the ones a
-- claim would scan past), through the claim index, at most 10000 a call;
-- locked heads are skipped for the next call, so it never waits on a row
-- lock. With no kind paused, any head still marked is unmarked (a
-- defence: resume_kind unmarks its kind's heads itself, and writers that
-- change a head's kind unmark it). The leader calls it now and then; with
-- nothing paused it reads one empty table and one empty index. Returns how
-- many heads changed.
CREATE OR REPLACE FUNCTION pgsched.pause_sweep()
RETURNS integer
LANGUAGE plpgsql
SET jit = off
AS $$
DECLARE
    kinds   text[];
    changed integer := 0;
    parts   integer[];
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('pgsched.paused_kinds'));
    SELECT array_agg(kind) INTO kinds FROM pgsched.paused_kinds;
    IF kinds IS NULL THEN
        UPDATE pgsched.heads h SET paused = false
        FROM (SELECT x.partition_id, x.ordering_id FROM pgsched.heads x WHERE x.paused
              LIMIT 10000 FOR UPDATE SKIP LOCKED) k
        WHERE h.partition_id = k.partition_id AND h.ordering_id = k.ordering_id;
        GET DIAGNOSTICS changed = ROW_COUNT;
        IF changed > 0 THEN
            PERFORM pg_notify('pgsched.due', '');
        END IF;
        RETURN changed;
    END IF;
    SELECT array_agg(p) INTO parts FROM generate_series(0, (SELECT s.partition_count - 1 FROM pgsched.settings s)) AS p;
    UPDATE pgsched.heads h SET paused = true
    FROM (SELECT x.partition_id, x.ordering_id FROM pgsched.heads x
          WHERE x.partition_id = ANY (parts) AND x.chain = 0 AND NOT x.paused
            AND x.run_at <= now() + interval '1 minute'
            AND NOT x.running AND x.kind = ANY (kinds)
          LIMIT 10000 FOR UPDATE SKIP LOCKED) k
    WHERE h.partition_id = k.partition_id AND h.ordering_id = k.ordering_id AND NOT h.running;
    GET DIAGNOSTICS changed = ROW_COUNT;
    RETURN changed;
END
$$;
