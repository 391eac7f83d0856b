-- node_register starts a new term for a node: a fresh epoch (greater than
-- p_after_epoch, the last one the process held) and a lease of p_ttl_seconds,
-- unless the node must wait. Then epoch is NULL and wait_reason says why,
-- wait_until until when (on the database clock, as db_now):
--
--   'node_id': another process (another p_instance) holds a live lease on
--     this node id; holder_host and holder_pid name it. Two processes never
--     hold one node id: the second waits until the first deregisters or
--     its lease runs out (a restart after a crash waits at most one TTL).
--   'failover': this server became the primary of a new timeline (a
--     standby was promoted, or a point-in-time recovery ran) at
--     timeline_since. Its rows may be older than what nodes last wrote on
--     the old primary: asynchronous replication loses the last commits,
--     renewals and claims included, so a node may be running a task this
--     server thinks is waiting, or still holding a lease this server thinks
--     expired. No node registers until every lease the old primary could
--     have granted has run out (the longest TTL of any node after the
--     first registration here), and terms of the old timeline are refused
--     by claims and renewals (pgsched.timeline()), so by the time anybody
--     claims here, every node of the old primary has stopped its handlers
--     by its own clock. With synchronous replication nothing is lost and
--     this is only a pause.
--
-- The first registration on a timeline decides: when the timelines table
-- knows an earlier one, the server changed; a new schema, or one upgraded
-- from before timelines were recorded, starts without a pause.
CREATE OR REPLACE FUNCTION pgsched.node_register(p_node_id text, p_instance text, p_ttl_seconds float8, p_host text,
                                                 p_pid integer, p_leaving boolean, p_after_epoch bigint)
RETURNS TABLE (epoch bigint, lease_expires_at timestamptz, wait_reason text, wait_until timestamptz,
               holder_host text, holder_pid integer, timeline integer, timeline_since timestamptz, db_now timestamptz)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    t_now   timestamptz := now();
    ttl     interval := make_interval(secs => p_ttl_seconds);
    tl      integer := pgsched.timeline();
    tl_row  pgsched.timelines;
    old     pgsched.nodes;
    had     boolean;
    e       bigint;
BEGIN
    IF tl <> 0 THEN
        SELECT * INTO tl_row FROM pgsched.timelines t WHERE t.timeline = tl;
        IF NOT FOUND THEN
            INSERT INTO pgsched.timelines AS t (timeline, first_seen, leases_from)
            SELECT tl, t_now,
                   CASE WHEN EXISTS (SELECT 1 FROM pgsched.timelines x WHERE x.timeline <> tl)
                        THEN greatest(t_now + ttl,
                                      (SELECT max(greatest(n.lease_expires_at, t_now + (n.lease_expires_at - n.renewed_at)))
                                       FROM pgsched.nodes n),
                                      (SELECT max(greatest(l.lease_expires_at, t_now + (l.lease_expires_at - l.renewed_at)))
                                       FROM pgsched.leader l))
                        ELSE t_now END
            ON CONFLICT DO NOTHING;
            SELECT * INTO tl_row FROM pgsched.timelines t WHERE t.timeline = tl;
        END IF;
        IF tl_row.leases_from > t_now THEN
            RETURN QUERY SELECT NULL::bigint, NULL::timestamptz, 'failover'::text, tl_row.leases_from,
                                NULL::text, NULL::integer, tl, tl_row.first_seen, t_now;
            RETURN;
        END IF;
    END IF;
    LOOP
        SELECT * INTO old FROM pgsched.nodes n WHERE n.node_id = p_node_id FOR UPDATE;
        had := FOUND;
        IF had AND old.instance IS DISTINCT FROM p_instance AND old.lease_expires_at > t_now THEN
            RETURN QUERY SELECT NULL::bigint, NULL::timestamptz, 'node_id'::text, old.lease_expires_at,
                                old.host, old.pid, tl, NULL::timestamptz, t_now;
            RETURN;
        END IF;
        e := nextval('pgsched.epoch_seq');
        IF e <= p_after_epoch THEN
            -- A sequence can go back with the rest of a promoted standby;
            -- a node's epochs never do, so its old term's writes stay fenced.
            e := p_after_epoch + 1;
        END IF;
        IF NOT had THEN
            INSERT INTO pgsched.nodes AS n (node_id, epoch, lease_expires_at, registered_at, renewed_at, host, pid, leaving,
                                            instance, timeline)
            VALUES (p_node_id, e, t_now + ttl, t_now, t_now, p_host, p_pid, p_leaving, p_instance, tl)
            ON CONFLICT (node_id) DO NOTHING;
            IF NOT FOUND THEN
                CONTINUE; -- registered meanwhile by someone else: look again
            END IF;
        ELSE
            UPDATE pgsched.nodes n
            SET epoch = e, lease_expires_at = t_now + ttl, registered_at = t_now, renewed_at = t_now,
                host = p_host, pid = p_pid, leaving = p_leaving, instance = p_instance, timeline = tl
            WHERE n.node_id = p_node_id;
        END IF;
        RETURN QUERY SELECT e, t_now + ttl, NULL::text, NULL::timestamptz, NULL::text, NULL::integer, tl,
                            NULL::timestamptz, t_now;
        RETURN;
    END LOOP;
END
$$;
