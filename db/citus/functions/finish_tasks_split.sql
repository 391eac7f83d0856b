-- finish_tasks_split is finish_tasks on Citus for a batch spanning
-- partitions: one call per partition, in partition order, in the caller's
-- transaction, each routed whole; the successors handed over count
-- against one budget (p_chain). It returns what finish_tasks returns: the
-- handed-over rows, then one row with every call's applied ids and
-- claimable count.
CREATE OR REPLACE FUNCTION pgsched.finish_tasks_split(
    p_node_id      text,
    p_epoch        bigint,
    partition_ids  integer[],
    ordering_ids   text[],
    task_ids       bigint[],
    claimed_ats    timestamptz[],
    outcomes       text[],
    retry_delays   float8[],
    errors         text[],
    p_chain        integer,
    p_chain_partitions integer[],
    p_chain_limit  integer
)
RETURNS TABLE (applied bigint[], partition_id integer, id bigint, ordering_id text, scheduled_at timestamptz,
               uniqueness_key text, kind text, payload jsonb, attempt integer, run_at timestamptz,
               claimed_at timestamptz, claimable integer, tick boolean, traceparent text, priority integer, group_key text)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    room  integer := coalesce(p_chain, 0);
    q     record;
    r     record;
    acc   bigint[] := '{}';
    acc_n integer := 0;
BEGIN
    FOR q IN SELECT x.p, array_agg(x.i ORDER BY x.i) AS pos FROM unnest(partition_ids) WITH ORDINALITY AS x(p, i) GROUP BY x.p ORDER BY x.p LOOP
        FOR r IN SELECT * FROM pgsched.finish_tasks(p_node_id, p_epoch,
                ARRAY(SELECT partition_ids[j] FROM unnest(q.pos) AS j), ARRAY(SELECT ordering_ids[j] FROM unnest(q.pos) AS j),
                ARRAY(SELECT task_ids[j] FROM unnest(q.pos) AS j), ARRAY(SELECT claimed_ats[j] FROM unnest(q.pos) AS j),
                ARRAY(SELECT outcomes[j] FROM unnest(q.pos) AS j), ARRAY(SELECT retry_delays[j] FROM unnest(q.pos) AS j),
                ARRAY(SELECT errors[j] FROM unnest(q.pos) AS j), room, p_chain_partitions, p_chain_limit) AS f LOOP
            IF r.applied IS NOT NULL THEN
                acc := acc || r.applied;
                acc_n := acc_n + r.claimable;
            ELSE
                applied := NULL; partition_id := r.partition_id; id := r.id; ordering_id := r.ordering_id;
                scheduled_at := r.scheduled_at; uniqueness_key := r.uniqueness_key; kind := r.kind; payload := r.payload;
                attempt := r.attempt; run_at := r.run_at; claimed_at := r.claimed_at; claimable := NULL; tick := r.tick;
                traceparent := r.traceparent; priority := r.priority; group_key := r.group_key;
                room := greatest(room - 1, 0);
                RETURN NEXT;
            END IF;
        END LOOP;
    END LOOP;
    applied := acc; claimable := acc_n;
    partition_id := NULL; id := NULL; ordering_id := NULL; scheduled_at := NULL; uniqueness_key := NULL; kind := NULL;
    payload := NULL; attempt := NULL; run_at := NULL; claimed_at := NULL; tick := NULL; traceparent := NULL;
    priority := NULL; group_key := NULL;
    RETURN NEXT;
END
$$;
