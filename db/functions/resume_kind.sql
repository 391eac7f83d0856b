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
BEGIN
    IF p_kind IS NULL OR p_kind = '' THEN
        RAISE EXCEPTION USING MESSAGE = 'pgsched: kind is required', ERRCODE = 'PGS01';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('pgsched.paused_kinds'));
    DELETE FROM pgsched.paused_kinds WHERE kind = p_kind;
    was := FOUND;
    UPDATE pgsched.heads h SET paused = false
    FROM (SELECT x.partition_id, x.ordering_id FROM pgsched.heads x
          WHERE x.paused AND x.kind = p_kind
          ORDER BY x.partition_id, x.ordering_id
          FOR UPDATE) k
    WHERE h.partition_id = k.partition_id AND h.ordering_id = k.ordering_id AND h.paused;
    PERFORM pg_notify('pgsched.pause', p_kind);
    PERFORM pg_notify('pgsched.due', '');
    RETURN was;
END
$$;
