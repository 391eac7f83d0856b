-- schedule_settle ends a schedule_many batch: it refuses the batch when a
-- key is running (PGS03, results holds NULL there), settles the
-- ordering_ids that got backlog tasks or lost a head (settle_p, settle_o)
-- or hold a completed key (done), and wakes the nodes when a task is due
-- before p_notify_before.
CREATE OR REPLACE FUNCTION pgsched.schedule_settle(results text[], parts integer[], ordering_ids text[],
                                                   scheduled_ats timestamptz[], uniqueness_keys text[], done integer[],
                                                   settle_p integer[], settle_o text[], p_notify_before timestamptz)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    n      integer := cardinality(results);
    bad_at integer;
    where_ text := '';
BEGIN
    bad_at := array_position(results, NULL);
    IF bad_at IS NOT NULL THEN
        IF n > 1 THEN
            where_ := format(' (batch item %s)', bad_at);
        END IF;
        RAISE EXCEPTION 'pgsched: task (%, %, %) is running and cannot be changed%',
            ordering_ids[bad_at], scheduled_ats[bad_at], coalesce(uniqueness_keys[bad_at], ''), where_
            USING ERRCODE = 'PGS03';
    END IF;

    IF done IS NOT NULL THEN
        SELECT settle_p || array_agg(u.p), settle_o || array_agg(u.o) INTO settle_p, settle_o
        FROM unnest(parts, ordering_ids) WITH ORDINALITY AS u(p, o, i) WHERE u.i IN (SELECT unnest(done));
    END IF;
    IF settle_p IS NOT NULL THEN
        PERFORM pgsched.settle_heads(settle_p, settle_o);
    END IF;

    IF EXISTS (SELECT 1 FROM unnest(scheduled_ats, results) AS u(sa, r)
               WHERE u.r <> 'already_completed' AND u.sa <= p_notify_before) THEN
        PERFORM pg_notify('pgsched.due', '');
    END IF;
END
$$;
