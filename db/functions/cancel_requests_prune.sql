-- cancel_requests_prune deletes the cancel requests of tasks that are no
-- longer in line (recorded as dead, or completed before the cancel
-- reached them): one primary key probe of heads each. The leader calls it
-- every round; returns how many it deleted.
CREATE OR REPLACE FUNCTION pgsched.cancel_requests_prune()
RETURNS integer
LANGUAGE sql
AS $$
    WITH gone AS (
        DELETE FROM pgsched.cancel_requests c
        WHERE NOT EXISTS (SELECT 1 FROM pgsched.heads h
                          WHERE h.partition_id = c.partition_id AND h.ordering_id = c.ordering_id AND h.id = c.task_id)
          AND NOT EXISTS (SELECT 1 FROM pgsched.backlog b
                          WHERE b.partition_id = c.partition_id AND b.ordering_id = c.ordering_id AND b.id = c.task_id)
        RETURNING 1
    )
    SELECT count(*)::integer FROM gone;
$$;
