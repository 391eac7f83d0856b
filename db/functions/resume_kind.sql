-- resume_kind lets the cluster start tasks of a kind again: its heads go
-- back into the claim index and nodes are told (pgsched.pause, then
-- pgsched.due). Returns true when the kind was paused.
CREATE OR REPLACE FUNCTION pgsched.resume_kind(p_kind text)
RETURNS boolean
LANGUAGE plpgsql
SET jit = off
AS $$
DECLARE
    was boolean;
    p   integer;
BEGIN
    IF p_kind IS NULL OR p_kind = '' THEN
        RAISE EXCEPTION USING MESSAGE = 'pgsched: kind is required', ERRCODE = 'PGS01';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('pgsched.paused_kinds'));
    DELETE FROM pgsched.paused_kinds WHERE kind = p_kind;
    was := FOUND;
    -- Partition by partition (one shard per statement on Citus), only
    -- those with marked heads of the kind (the heads_paused index).
    FOR p IN SELECT DISTINCT x.partition_id FROM pgsched.heads x WHERE x.paused AND x.kind = p_kind ORDER BY 1 LOOP
        UPDATE pgsched.heads h SET paused = false
        FROM (SELECT x.ordering_id FROM pgsched.heads x
              WHERE x.partition_id = p AND x.paused AND x.kind = p_kind
              ORDER BY x.ordering_id
              FOR UPDATE) k
        WHERE h.partition_id = p AND h.ordering_id = k.ordering_id AND h.paused;
    END LOOP;
    PERFORM pg_notify('pgsched.pause', p_kind);
    PERFORM pg_notify('pgsched.due', '');
    RETURN was;
END
$$;
