-- finish_give_back is finish_tasks' part for outcomes that make a running
-- task pending again: 'retry' (retry_delay seconds from now, the error
-- kept), 'release' (as it was, the attempt given back: a graceful stop),
-- 'snooze' (retry_delay seconds from now, the attempt given back). Only
-- tasks still held by the claim the outcome is for change. Returns the ids
-- of those that changed, and how many of them a limit counted (see
-- limit_release). The heads are locked already (finish_tasks calls
-- lock_heads first), so the tasks counted are the ones that change.
CREATE OR REPLACE FUNCTION pgsched.finish_give_back(
    p_node_id     text,
    p_epoch       bigint,
    partition_ids integer[],
    ordering_ids  text[],
    task_ids      bigint[],
    claimed_ats   timestamptz[],
    outcomes      text[],
    retry_delays  float8[],
    errors        text[],
    OUT back_id   bigint[],
    OUT freed     integer
)
LANGUAGE plpgsql
SET jit = off
SET enable_seqscan = off
AS $$
DECLARE
    back_p    integer[];
    back_o    text[];
    limited   text[];
    limited_groups text[];
    t_now     timestamptz := now();
    retry_ats timestamptz[];
    -- A task of a limited kind goes back parked (pgsched.set_limit).
    v_limited text[] := ARRAY(SELECT l.kind FROM pgsched.kind_limits l);
BEGIN
    freed := 0;
    IF EXISTS (SELECT 1 FROM pgsched.limit_usage) THEN
        SELECT array_agg(h.kind), array_agg(coalesce(h.group_key, '')) INTO limited, limited_groups
        FROM unnest(partition_ids, ordering_ids, task_ids, claimed_ats, outcomes) AS b(p, o, id, ca, outcome)
        JOIN pgsched.heads h ON h.partition_id = b.p AND h.ordering_id = b.o AND h.id = b.id
        WHERE h.node_id = p_node_id AND h.epoch = p_epoch AND h.claimed_at = b.ca AND h.chain = -2
          AND b.outcome IN ('retry', 'release', 'snooze');
    END IF;
    -- Retry times computed apart: Citus refuses a STABLE function over a
    -- column in an UPDATE.
    retry_ats := ARRAY(SELECT t_now + make_interval(secs => coalesce(d.delay, 0))
                       FROM unnest(retry_delays) WITH ORDINALITY AS d(delay, i) ORDER BY d.i);
    WITH back AS (
        UPDATE pgsched.heads h
        SET running = false, node_id = NULL, epoch = NULL, claimed_at = NULL,
            chain = CASE WHEN h.kind = ANY (v_limited) THEN -1 ELSE 0 END,
            run_at = CASE WHEN b.outcome IN ('retry', 'snooze') THEN b.retry_at ELSE h.run_at END,
            attempt = CASE WHEN b.outcome IN ('release', 'snooze') THEN greatest(h.attempt - 1, 0) ELSE h.attempt END,
            last_error = CASE WHEN b.outcome = 'retry' THEN b.err ELSE h.last_error END
        FROM unnest(partition_ids, ordering_ids, task_ids, claimed_ats, outcomes, retry_ats, errors)
             AS b(p, o, id, ca, outcome, retry_at, err)
        WHERE h.partition_id = b.p AND h.ordering_id = b.o AND h.id = b.id
          AND h.node_id = p_node_id AND h.epoch = p_epoch AND h.claimed_at = b.ca AND b.outcome IN ('retry', 'release', 'snooze')
        RETURNING h.partition_id, h.ordering_id, h.id
    )
    SELECT array_agg(k.partition_id), array_agg(k.ordering_id), array_agg(k.id)
    INTO back_p, back_o, back_id FROM back k;
    IF back_id IS NOT NULL THEN
        -- A task enqueued earlier than the one given back runs first.
        PERFORM pgsched.settle_heads(back_p, back_o);
    END IF;
    freed := pgsched.limit_release(limited, limited_groups);
END
$$;
