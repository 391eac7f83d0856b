-- dead_ids selects dead tasks for the bulk forms of retry_dead and
-- delete_dead: every filter given must match (kind, ordering_id, died at
-- or after died_after, died before died_before). At least one is
-- required, so that a call with a forgotten argument cannot act on every
-- dead task; to act on all of them, pass died_before => now().
CREATE OR REPLACE FUNCTION pgsched.dead_ids(kind text, ordering_id text, died_after timestamptz, died_before timestamptz)
RETURNS bigint[]
LANGUAGE plpgsql
AS $$
DECLARE
    ids bigint[];
BEGIN
    IF kind IS NULL AND ordering_id IS NULL AND died_after IS NULL AND died_before IS NULL THEN
        RAISE EXCEPTION 'pgsched: give at least one filter: kind, ordering_id, died_after or died_before (died_before => now() selects every dead task)'
            USING ERRCODE = 'PGS01';
    END IF;
    SELECT coalesce(array_agg(d.id), '{}') INTO ids FROM pgsched.dead_tasks d
    WHERE (dead_ids.kind IS NULL OR d.kind = dead_ids.kind)
      AND (dead_ids.ordering_id IS NULL OR d.ordering_id = dead_ids.ordering_id)
      AND (died_after IS NULL OR d.died_at >= died_after)
      AND (died_before IS NULL OR d.died_at < died_before);
    RETURN ids;
END
$$;
