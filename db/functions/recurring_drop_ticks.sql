-- recurring_drop_ticks removes the ticks of a schedule that are pending and
-- not yet due (a change, pause or delete of the schedule must leave no
-- stale tick behind), with the ordering_id's head locked as every writer
-- does. Ticks are the tasks of the schedule's ordering_id marked as ticks
-- (recurring_materialize marks them). Returns how many it removed.
CREATE OR REPLACE FUNCTION pgsched.recurring_drop_ticks(p_name text)
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    p integer := pgsched.partition_of(p_name, (SELECT partition_count FROM pgsched.settings));
    n integer;
    m integer;
BEGIN
    PERFORM pgsched.lock_head(p, p_name);
    DELETE FROM pgsched.backlog b
    WHERE b.partition_id = p AND b.ordering_id = p_name AND b.tick AND b.scheduled_at > now();
    GET DIAGNOSTICS n = ROW_COUNT;
    DELETE FROM pgsched.heads h
    WHERE h.partition_id = p AND h.ordering_id = p_name AND h.tick AND h.scheduled_at > now()
      AND NOT h.running;
    GET DIAGNOSTICS m = ROW_COUNT;
    IF n + m > 0 THEN
        PERFORM pgsched.settle_heads(ARRAY[p], ARRAY[p_name]);
    END IF;
    RETURN n + m;
END
$$;
