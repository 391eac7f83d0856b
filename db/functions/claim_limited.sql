-- claim_limited claims, for the node (p_node_id, p_epoch), up to p_max
-- parked heads of limited kinds (pgsched.set_limit) from the given
-- partitions, due within p_ahead_seconds, as each kind's limit allows
-- (claim_limited_kind), kinds in name order so claims lock usage rows in
-- one order; paused kinds are left alone. claim_due_many calls it first
-- while any kind has a limit; on Citus the worker node calls it on the
-- coordinator, beside the claims delegated to the Citus workers, which
-- skip limited kinds.
CREATE OR REPLACE FUNCTION pgsched.claim_limited(p_node_id text, p_epoch bigint, p_partitions integer[], p_max integer,
                                      p_ahead_seconds float8 DEFAULT 0)
RETURNS SETOF pgsched.heads
LANGUAGE plpgsql
SET jit = off
AS $$
DECLARE
    lim     pgsched.kind_limits;
    left_   integer := p_max;
    got     integer;
    horizon timestamptz := now() + make_interval(secs => greatest(p_ahead_seconds, 0));
BEGIN
    FOR lim IN SELECT l.* FROM pgsched.kind_limits l
               WHERE NOT EXISTS (SELECT 1 FROM pgsched.paused_kinds k WHERE k.kind = l.kind) ORDER BY l.kind LOOP
        EXIT WHEN left_ <= 0;
        RETURN QUERY SELECT * FROM pgsched.claim_limited_kind(p_node_id, p_epoch, p_partitions, left_, horizon, lim);
        GET DIAGNOSTICS got = ROW_COUNT;
        left_ := left_ - got;
    END LOOP;
END
$$;
