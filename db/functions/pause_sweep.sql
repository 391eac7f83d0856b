-- pause_sweep marks the heads of paused kinds written since the kind was
-- paused (enqueued, promoted, given back), so they leave the claim index
-- too; claims skip them by kind meanwhile, so this is upkeep, not
-- correctness. Only heads due within a minute are looked at (the ones a
-- claim would scan past), through the claim index, at most 10000 a
-- partition;
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
    n       integer;
    p       integer;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('pgsched.paused_kinds'));
    SELECT array_agg(kind) INTO kinds FROM pgsched.paused_kinds;
    -- Each locking statement names one partition: on Citus it runs on the
    -- worker holding it (a statement locking rows of several shards is
    -- refused), and on one server it is an index probe of that partition.
    IF kinds IS NULL THEN
        FOR p IN SELECT DISTINCT x.partition_id FROM pgsched.heads x WHERE x.paused LOOP
            UPDATE pgsched.heads h SET paused = false
            FROM (SELECT x.ordering_id FROM pgsched.heads x WHERE x.partition_id = p AND x.paused
                  LIMIT 10000 FOR UPDATE SKIP LOCKED) k
            WHERE h.partition_id = p AND h.ordering_id = k.ordering_id;
            GET DIAGNOSTICS n = ROW_COUNT;
            changed := changed + n;
        END LOOP;
        IF changed > 0 THEN
            PERFORM pg_notify('pgsched.due', '');
        END IF;
        RETURN changed;
    END IF;
    -- Two statements a partition: heads of priority 0 and the others,
    -- each through its claim index (heads_due, heads_due_prio).
    FOR p IN SELECT generate_series(0, (SELECT s.partition_count - 1 FROM pgsched.settings s)) LOOP
        UPDATE pgsched.heads h SET paused = true
        FROM (SELECT x.ordering_id FROM pgsched.heads x
              WHERE x.partition_id = p AND x.chain = 0 AND NOT x.paused AND x.priority = 0
                AND x.run_at <= now() + interval '1 minute'
                AND NOT x.running AND x.kind = ANY (kinds)
              LIMIT 10000 FOR UPDATE SKIP LOCKED) k
        WHERE h.partition_id = p AND h.ordering_id = k.ordering_id AND NOT h.running;
        GET DIAGNOSTICS n = ROW_COUNT;
        changed := changed + n;
        UPDATE pgsched.heads h SET paused = true
        FROM (SELECT x.ordering_id FROM pgsched.heads x
              WHERE x.partition_id = p AND x.chain = 0 AND NOT x.paused AND x.priority <> 0
                AND x.run_at <= now() + interval '1 minute'
                AND NOT x.running AND x.kind = ANY (kinds)
              LIMIT 10000 FOR UPDATE SKIP LOCKED) k
        WHERE h.partition_id = p AND h.ordering_id = k.ordering_id AND NOT h.running;
        GET DIAGNOSTICS n = ROW_COUNT;
        changed := changed + n;
    END LOOP;
    RETURN changed;
END
$$;
