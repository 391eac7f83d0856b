-- claim_due_on is claim_due_many for partitions that live on one Citus
-- worker, p_anchor among them. On a schema distributed over Citus it is a
-- delegated function (see citus_delegate): the coordinator sends the call
-- whole to the worker holding p_anchor's shard, which runs every
-- statement on its own shards, so the coordinator only routes one call per
-- worker and batch. A partition whose shard lives elsewhere (moved since
-- the caller looked) is still claimed, through the worker. Inside a
-- transaction Citus does not delegate, and the coordinator runs it like
-- claim_due_many. On one server it is claim_due_many.
CREATE OR REPLACE FUNCTION pgsched.claim_due_on(p_anchor integer, p_node_id text, p_epoch bigint, p_partitions integer[],
                                     p_max integer, p_ahead_seconds float8 DEFAULT 0, p_served integer[] DEFAULT NULL,
                                     p_min_priority integer DEFAULT NULL)
RETURNS SETOF pgsched.heads
LANGUAGE plpgsql
AS $$
BEGIN
    RETURN QUERY SELECT * FROM pgsched.claim_due_many(p_node_id, p_epoch, p_partitions, p_max, p_ahead_seconds, p_served,
                                                        p_min_priority);
END
$$;
