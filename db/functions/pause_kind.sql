-- pause_kind stops the cluster from starting tasks of a kind: claims skip
-- it (claim_due_many), finishes do not hand a task of it over
-- (finish_tasks), and nodes give back the ones they hold but have not
-- started (told by NOTIFY on pgsched.pause). Its ordering_ids wait; other
-- kinds flow. Running tasks finish. Returns true when the kind was not
-- paused before.
--
-- Its idle heads are marked paused, in key order as every writer locks
-- heads, which takes them out of the claim index; heads of it written
-- later are marked by the leader's pause_sweep. Pausing, resuming and
-- sweeping take one advisory lock, so a sweep that read the kind as paused
-- cannot mark heads after a resume cleared them.
CREATE OR REPLACE FUNCTION pgsched.pause_kind(p_kind text)
RETURNS boolean
LANGUAGE plpgsql
SET jit = off
AS $$
DECLARE
    fresh boolean;
    p     integer;
BEGIN
    IF p_kind IS NULL OR p_kind = '' THEN
        RAISE EXCEPTION USING MESSAGE = 'pgsched: kind is required', ERRCODE = 'PGS01';
    END IF;
    IF octet_length(p_kind) > 255 THEN
        RAISE EXCEPTION USING MESSAGE = format('pgsched: kind is %s bytes, over the limit of 255', octet_length(p_kind)), ERRCODE = 'PGS01';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('pgsched.paused_kinds'));
    INSERT INTO pgsched.paused_kinds (kind) VALUES (p_kind) ON CONFLICT (kind) DO NOTHING;
    fresh := FOUND;
    -- Partition by partition, in order (one shard per statement on Citus).
    FOR p IN SELECT generate_series(0, (SELECT s.partition_count - 1 FROM pgsched.settings s)) LOOP
        UPDATE pgsched.heads h SET paused = true
        FROM (SELECT x.ordering_id FROM pgsched.heads x
              WHERE x.partition_id = p AND x.kind = p_kind AND NOT x.paused AND NOT x.running
              ORDER BY x.ordering_id
              FOR UPDATE) k
        WHERE h.partition_id = p AND h.ordering_id = k.ordering_id AND h.kind = p_kind AND NOT h.running;
    END LOOP;
    PERFORM pg_notify('pgsched.pause', p_kind);
    RETURN fresh;
END
$$;
