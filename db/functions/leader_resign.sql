-- leader_resign gives the lease up (clean shutdown) so another node takes
-- over at once instead of after the TTL.
CREATE OR REPLACE FUNCTION pgsched.leader_resign(p_node_id text, p_epoch bigint)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM pgsched.leader l WHERE l.node_id = p_node_id AND l.epoch = p_epoch;
    IF FOUND THEN
        PERFORM pg_notify('pgsched.assign', '');
    END IF;
    RETURN FOUND;
END
$$;
