-- lock_head locks one ordering_id's head for a writer about to change its
-- backlog, forgetting the head's known successors (see "Known
-- successors"), and returns the head's key and whether it runs; no row when
-- the ordering_id has no task. A finish that deleted the head while this
-- waited for its lock leaves the UPDATE nothing, though it made the next
-- task the head: the lock is then tried again in a new statement, whose
-- snapshot sees that one.
CREATE OR REPLACE FUNCTION pgsched.lock_head(p integer, o text)
RETURNS TABLE (scheduled_at timestamptz, uniqueness_key text, running boolean)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
BEGIN
    FOR i IN 1 .. 100 LOOP
        RETURN QUERY
        UPDATE pgsched.heads h SET next_tids = NULL, next_ids = NULL
        WHERE h.partition_id = p AND h.ordering_id = o
        RETURNING h.scheduled_at, h.uniqueness_key::text, h.running;
        EXIT WHEN FOUND OR NOT EXISTS (SELECT 1 FROM pgsched.heads h WHERE h.partition_id = p AND h.ordering_id = o);
    END LOOP;
END
$$;
