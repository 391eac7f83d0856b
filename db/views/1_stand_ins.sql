-- stand_ins: for every member that does not serve (its lease is not live,
-- its row is gone, or it is leaving), the serving node that stands in for
-- it: its backup, or, when the backup is down too, the backup's backup, and
-- so on.
CREATE OR REPLACE VIEW pgsched.stand_ins AS
WITH RECURSIVE down AS (
    SELECT b.node_id, b.backup_node_id FROM pgsched.backups b
    WHERE NOT EXISTS (SELECT 1 FROM pgsched.nodes n
                      WHERE n.node_id = b.node_id AND n.lease_expires_at > now() AND NOT n.leaving)
), chain (node_id, via, seen) AS (
    SELECT d.node_id, d.backup_node_id, ARRAY[d.node_id] FROM down d
    UNION ALL
    -- Follow the chain through down nodes; a chain that comes back to a
    -- node it passed is all down, and stops.
    SELECT c.node_id, d.backup_node_id, c.seen || d.node_id FROM chain c JOIN down d ON d.node_id = c.via
    WHERE d.node_id <> ALL (c.seen)
)
SELECT c.node_id, c.via AS stand_in_node_id,
       CASE WHEN dn.lease_expires_at > now() THEN NULL ELSE dn.lease_expires_at END AS down_since -- NULL: leaving, or row gone
FROM chain c
JOIN pgsched.nodes s ON s.node_id = c.via AND s.lease_expires_at > now() AND NOT s.leaving
LEFT JOIN pgsched.nodes dn ON dn.node_id = c.node_id;
