-- deplete removes nodes whose lease ended more than p_flex_down_seconds ago:
-- their running tasks go back to their queues and their node rows are
-- deleted. Leader only (false-y: returns an empty array otherwise). Returns
-- the ids removed; the caller then reassigns their partitions.
CREATE OR REPLACE FUNCTION pgsched.deplete(p_node_id text, p_epoch bigint, p_flex_down_seconds float8)
RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    gone text[];
BEGIN
    PERFORM 1 FROM pgsched.leader x
    WHERE x.node_id = p_node_id AND x.epoch = p_epoch AND x.lease_expires_at > now()
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN '{}';
    END IF;
    SELECT coalesce(array_agg(n.node_id ORDER BY n.node_id), '{}') INTO gone FROM pgsched.nodes n
    WHERE n.lease_expires_at < now() - make_interval(secs => p_flex_down_seconds);
    IF cardinality(gone) = 0 THEN
        RETURN gone;
    END IF;
    PERFORM pgsched.rescue_expired(gone);
    DELETE FROM pgsched.nodes n
    WHERE n.node_id = ANY (gone) AND n.lease_expires_at < now() - make_interval(secs => p_flex_down_seconds);
    RETURN gone;
END
$$;
