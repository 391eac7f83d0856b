-- cancel_requests_prune deletes the cancel requests of tasks that are no
-- longer in line (recorded as dead, or completed before the cancel
-- reached them): a primary key probe of heads (and backlog) each, one
-- request at a time (they are few, and on Citus each probe is routed to
-- the worker holding its partition). The leader calls it every round;
-- returns how many it deleted.
CREATE OR REPLACE FUNCTION pgsched.cancel_requests_prune()
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    r record;
    n integer := 0;
BEGIN
    FOR r IN SELECT c.partition_id, c.ordering_id, c.task_id FROM pgsched.cancel_requests c LOOP
        CONTINUE WHEN EXISTS (SELECT 1 FROM pgsched.heads h
                              WHERE h.partition_id = r.partition_id AND h.ordering_id = r.ordering_id AND h.id = r.task_id)
                   OR EXISTS (SELECT 1 FROM pgsched.backlog b
                              WHERE b.partition_id = r.partition_id AND b.ordering_id = r.ordering_id AND b.id = r.task_id);
        DELETE FROM pgsched.cancel_requests c
        WHERE c.partition_id = r.partition_id AND c.ordering_id = r.ordering_id AND c.task_id = r.task_id;
        n := n + 1;
    END LOOP;
    RETURN n;
END
$$;
