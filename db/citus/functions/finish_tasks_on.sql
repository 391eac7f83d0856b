-- finish_tasks_on is finish_tasks for tasks of partitions that live on one
-- Citus worker, p_anchor among them, delegated to that worker on a schema
-- distributed over Citus (see claim_due_on and citus_delegate): the
-- outcomes commit on that worker alone.
CREATE OR REPLACE FUNCTION pgsched.finish_tasks_on(
    p_anchor       integer,
    p_node_id      text,
    p_epoch        bigint,
    partition_ids  integer[],
    ordering_ids   text[],
    task_ids       bigint[],
    claimed_ats    timestamptz[],
    outcomes       text[],
    retry_delays   float8[],
    errors         text[],
    p_chain        integer DEFAULT 0,
    p_chain_partitions integer[] DEFAULT NULL,
    p_chain_limit  integer DEFAULT 0
)
RETURNS TABLE (applied bigint[], partition_id integer, id bigint, ordering_id text, scheduled_at timestamptz,
               uniqueness_key text, kind text, payload jsonb, attempt integer, run_at timestamptz,
               claimed_at timestamptz, claimable integer, tick boolean, traceparent text, priority integer, group_key text)
LANGUAGE plpgsql
AS $$
BEGIN
    RETURN QUERY SELECT * FROM pgsched.finish_tasks(p_node_id, p_epoch, partition_ids, ordering_ids, task_ids, claimed_ats,
                                                    outcomes, retry_delays, errors, p_chain, p_chain_partitions, p_chain_limit);
END
$$;
