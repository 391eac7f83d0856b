-- assign writes the leader's plan: the owner of each partition and the
-- backup of each member node. Only the current leader (p_node_id, p_epoch,
-- with an unexpired lease, registered on this server's timeline) can
-- write; anyone else gets false and changes nothing. Rows whose value is unchanged are left alone, so assigned_at
-- tells when an owner last changed.
CREATE OR REPLACE FUNCTION pgsched.assign(
    p_node_id      text,
    p_epoch        bigint,
    partition_ids  integer[],
    owners         text[],
    backup_of      text[],
    backup_nodes   text[]
)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    t_now timestamptz := now();
    l     pgsched.leader;
BEGIN
    SELECT * INTO l FROM pgsched.leader x
    WHERE x.node_id = p_node_id AND x.epoch = p_epoch AND x.lease_expires_at > t_now
      AND EXISTS (SELECT 1 FROM pgsched.nodes n
                  WHERE n.node_id = p_node_id AND n.epoch = p_epoch AND n.timeline IN (0, pgsched.timeline()))
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    UPDATE pgsched.partition_owners po SET node_id = a.o, term = l.term, assigned_at = t_now
    FROM unnest(partition_ids, owners) AS a(p, o)
    WHERE po.partition_id = a.p AND po.node_id IS DISTINCT FROM a.o;
    DELETE FROM pgsched.backups b
    WHERE NOT EXISTS (SELECT 1 FROM unnest(backup_of) AS a(n) WHERE a.n = b.node_id);
    INSERT INTO pgsched.backups AS b (node_id, backup_node_id, term, assigned_at)
    SELECT a.n, a.b, l.term, t_now FROM unnest(backup_of, backup_nodes) AS a(n, b)
    ON CONFLICT (node_id) DO UPDATE
    SET backup_node_id = excluded.backup_node_id, term = excluded.term, assigned_at = excluded.assigned_at
    WHERE b.backup_node_id <> excluded.backup_node_id;
    PERFORM pg_notify('pgsched.assign', '');
    RETURN true;
END
$$;
