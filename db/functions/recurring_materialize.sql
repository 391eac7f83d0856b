-- recurring_materialize creates a schedule's next ticks as tasks and moves
-- its next_tick on, if next_tick is still p_expected (compare and set: of
-- two nodes materializing the same ticks, one does, the other changes
-- nothing) and the schedule is not paused. A tick is a task marked as one
-- (tick), of the schedule's kind and payload, with ordering_id the
-- schedule's name, uniqueness_key 'tick ' and the tick's time in UTC, and
-- scheduled_at the
-- tick, or, for a tick already past (a catch-up), now plus its place in
-- the batch in microseconds, so catch-ups run at once, in order. Returns
-- the ticks created, or -1 when the compare failed. A schedule the leader
-- had set aside (failing_since) works again once this succeeds.
CREATE OR REPLACE FUNCTION pgsched.recurring_materialize(p_name text, p_expected timestamptz, p_next timestamptz,
                                                         p_ticks timestamptz[])
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    r   pgsched.recurring_schedules;
    n   integer := coalesce(cardinality(p_ticks), 0);
    uks text[];
    p   integer;
BEGIN
    UPDATE pgsched.recurring_schedules s
    SET next_tick = p_next, last_tick = coalesce(p_ticks[n], s.last_tick),
        failing_since = NULL, last_error = NULL, retry_at = NULL
    WHERE s.name = p_name AND NOT s.paused AND s.next_tick IS NOT DISTINCT FROM p_expected
    RETURNING s.* INTO r;
    IF NOT FOUND THEN
        RETURN -1;
    END IF;
    IF n > 0 THEN
        uks := ARRAY(SELECT 'tick ' || to_char(t.tick AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
                     FROM unnest(p_ticks) WITH ORDINALITY AS t(tick, i) ORDER BY t.i);
        PERFORM pgsched.schedule_many(
            array_fill(p_name, ARRAY[n]),
            ARRAY(SELECT greatest(t.tick, now() + make_interval(secs => t.i / 1e6))
                  FROM unnest(p_ticks) WITH ORDINALITY AS t(tick, i) ORDER BY t.i),
            uks, array_fill(r.payload, ARRAY[n]), array_fill(r.kind, ARRAY[n]));
        -- Marked in the same transaction, so no tick is ever seen unmarked.
        p := pgsched.partition_of(p_name, (SELECT s.partition_count FROM pgsched.settings s));
        UPDATE pgsched.heads h SET tick = true
        WHERE h.partition_id = p AND h.ordering_id = p_name AND h.uniqueness_key = ANY (uks) AND NOT h.tick;
        UPDATE pgsched.backlog b SET tick = true
        WHERE b.partition_id = p AND b.ordering_id = p_name AND b.uniqueness_key = ANY (uks) AND NOT b.tick;
    END IF;
    RETURN n;
END
$$;
