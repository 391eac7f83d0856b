-- retry_dead_ids puts the dead tasks with the given ids back in line and
-- returns how many: each is enqueued again as a new task (new id, attempt
-- 0) with its ordering_id, uniqueness_key, kind, payload, priority,
-- group_key and traceparent (its run's span links to the enqueue that
-- began it), due now, so
-- it runs after whatever its ordering_id has already due and before what
-- is scheduled later. Several of one ordering_id are due a microsecond
-- apart, in their original order, so their keys stay distinct. It goes
-- through schedule_many, so order, locking and notifications are those of
-- any enqueue; if a key is taken after all (a pending or completed task at
-- that very microsecond), the call fails and nothing changes. It runs
-- with its owner's rights, as the schedule_many it calls does: on Citus a
-- transaction may not touch one placement as two users (the worker role's
-- DELETE, then the owner's INSERT).
CREATE OR REPLACE FUNCTION pgsched.retry_dead_ids(ids bigint[])
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t     timestamptz := now();
    o     text[];
    sa    timestamptz[];
    uk    text[];
    pl    jsonb[];
    k     text[];
    tp    text[];
    pr    integer[];
    gk    text[];
    res   text[];
BEGIN
    WITH gone AS (
        DELETE FROM pgsched.dead_tasks d WHERE d.id = ANY (ids) RETURNING d.*
    ), ranked AS (
        SELECT g.*, row_number() OVER (PARTITION BY g.ordering_id ORDER BY g.scheduled_at, g.id) AS r FROM gone g
    )
    SELECT array_agg(r.ordering_id::text ORDER BY r.ordering_id, r.r),
           array_agg(t + (r.r - 1) * interval '1 microsecond' ORDER BY r.ordering_id, r.r),
           array_agg(r.uniqueness_key::text ORDER BY r.ordering_id, r.r),
           array_agg(r.payload ORDER BY r.ordering_id, r.r),
           array_agg(r.kind ORDER BY r.ordering_id, r.r),
           array_agg(r.traceparent ORDER BY r.ordering_id, r.r),
           array_agg(r.priority ORDER BY r.ordering_id, r.r),
           array_agg(r.group_key ORDER BY r.ordering_id, r.r)
    INTO o, sa, uk, pl, k, tp, pr, gk FROM ranked r;
    IF o IS NULL THEN
        RETURN 0;
    END IF;
    res := pgsched.schedule_many(o, sa, uk, pl, k, false, tp, pr, gk);
    IF EXISTS (SELECT 1 FROM unnest(res) AS x(r) WHERE x.r <> 'inserted') THEN
        RAISE EXCEPTION 'pgsched: a retried dead task''s new key is taken by another task; nothing changed, try again'
            USING ERRCODE = 'PGS05';
    END IF;
    RETURN cardinality(o);
END
$$;
