-- finish_hand_limited gives the room that finish_tasks' completed and dead
-- tasks of limited kinds (p_kinds, one element per task) left under their
-- limits to the kinds' next parked tasks at once: it claims up to p_max
-- of them for the node (p_node_id, p_epoch), due by p_horizon, as a claim
-- would (claim_limited_kind: within the limit, groups in turn, then
-- time), for finish_tasks to hand over as it hands over successors, so
-- the room does not wait for a claim that limit_release's notice wakes.
-- From every partition, not only the node's: the next tasks are the same
-- whichever node's finish frees the room, so one node's backlog does not
-- keep the room from another's. Kinds in p_held (paused) are left alone.
CREATE OR REPLACE FUNCTION pgsched.finish_hand_limited(p_node_id text, p_epoch bigint, p_kinds text[], p_held text[],
                                            p_max integer, p_horizon timestamptz)
RETURNS SETOF pgsched.heads
LANGUAGE plpgsql
SET jit = off
AS $$
DECLARE
    lim   pgsched.kind_limits;
    left_ integer := p_max;
    got   integer;
    parts integer[] := ARRAY(SELECT generate_series(0, s.partition_count - 1) FROM pgsched.settings s);
BEGIN
    FOR lim IN SELECT l.* FROM pgsched.kind_limits l
               WHERE l.kind = ANY (p_kinds) AND l.kind <> ALL (coalesce(p_held, '{}')) ORDER BY l.kind LOOP
        EXIT WHEN left_ <= 0;
        RETURN QUERY SELECT * FROM pgsched.claim_limited_kind(p_node_id, p_epoch, parts, left_, p_horizon, lim);
        GET DIAGNOSTICS got = ROW_COUNT;
        left_ := left_ - got;
    END LOOP;
END
$$;
