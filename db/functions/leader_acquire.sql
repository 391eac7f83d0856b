-- leader_acquire takes or renews the leader lease for a node holding a live
-- node lease under p_epoch (not leaving, and registered on this server's
-- timeline: see node_register), and returns the leader term it
-- holds, or NULL when another node leads. The lease is taken when it is
-- absent, expired, or held by a node whose own lease is gone (deregistered,
-- expired, or re-registered under a new epoch) or that is leaving. Times are taken into variables first
-- (Citus forbids now() inside ON CONFLICT).
CREATE OR REPLACE FUNCTION pgsched.leader_acquire(p_node_id text, p_epoch bigint, p_ttl_seconds float8)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    t_now   timestamptz := now();
    expires timestamptz := now() + make_interval(secs => p_ttl_seconds);
    l       pgsched.leader;
    t       bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pgsched.nodes n
                   WHERE n.node_id = p_node_id AND n.epoch = p_epoch AND n.lease_expires_at > t_now AND NOT n.leaving
                     AND n.timeline IN (0, pgsched.timeline())) THEN
        RETURN NULL;
    END IF;
    SELECT * INTO l FROM pgsched.leader FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO pgsched.leader AS x (node_id, epoch, term, elected_at, renewed_at, lease_expires_at)
        VALUES (p_node_id, p_epoch, nextval('pgsched.leader_term_seq'), t_now, t_now, expires)
        ON CONFLICT (singleton) DO NOTHING
        RETURNING x.term INTO t;
        IF t IS NOT NULL THEN
            PERFORM pg_notify('pgsched.assign', '');
        END IF;
        RETURN t;
    END IF;
    IF l.node_id = p_node_id AND l.epoch = p_epoch AND l.lease_expires_at > t_now THEN
        UPDATE pgsched.leader x SET renewed_at = t_now, lease_expires_at = expires;
        RETURN l.term;
    END IF;
    IF l.lease_expires_at <= t_now OR NOT EXISTS (
        SELECT 1 FROM pgsched.nodes n
        WHERE n.node_id = l.node_id AND n.epoch = l.epoch AND n.lease_expires_at > t_now AND NOT n.leaving) THEN
        -- The next term apart: Citus refuses a volatile function in an
        -- UPDATE (the leader row is a reference table there).
        t := nextval('pgsched.leader_term_seq');
        UPDATE pgsched.leader x
        SET node_id = p_node_id, epoch = p_epoch, term = t,
            elected_at = t_now, renewed_at = t_now, lease_expires_at = expires;
        PERFORM pg_notify('pgsched.assign', '');
        RETURN t;
    END IF;
    RETURN NULL;
END
$$;
