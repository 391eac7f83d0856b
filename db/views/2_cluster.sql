-- cluster: one row per node: its lease, whether it leads, what it owns,
-- its backup and whom it stands in for. Joins rather than correlated
-- subqueries: the planner's guesses for these tiny tables would otherwise
-- cost the view a JIT compilation on every look.
CREATE OR REPLACE VIEW pgsched.cluster AS
WITH l AS (
    SELECT x.node_id, x.epoch FROM pgsched.leader x WHERE x.lease_expires_at > now()
), po AS (
    SELECT o.node_id, array_agg(o.partition_id ORDER BY o.partition_id) AS partitions
    FROM pgsched.partition_owners o WHERE o.node_id IS NOT NULL GROUP BY o.node_id
), si AS (
    SELECT s.stand_in_node_id, array_agg(s.node_id ORDER BY s.node_id) AS nodes
    FROM pgsched.stand_ins s GROUP BY s.stand_in_node_id
)
SELECT n.node_id, n.epoch,
       n.lease_expires_at > now() AS live,
       n.leaving,
       now() - n.renewed_at AS since_renewal,
       n.lease_expires_at, n.registered_at, n.host, n.pid,
       l.node_id IS NOT NULL AS leader,
       coalesce(po.partitions, '{}') AS partitions,
       b.backup_node_id AS backup,
       coalesce(si.nodes, '{}') AS standing_in_for
FROM pgsched.nodes n
LEFT JOIN l ON l.node_id = n.node_id AND l.epoch = n.epoch
LEFT JOIN pgsched.backups b ON b.node_id = n.node_id
LEFT JOIN po ON po.node_id = n.node_id
LEFT JOIN si ON si.stand_in_node_id = n.node_id;
