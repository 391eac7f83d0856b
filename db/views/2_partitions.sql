-- partitions: who owns each partition and who serves it now (the owner
-- while its lease is live and it is not leaving, else its stand-in; NULL:
-- nobody).
CREATE OR REPLACE VIEW pgsched.partitions AS
SELECT po.partition_id, po.node_id AS owner_node_id,
       coalesce(n.lease_expires_at > now(), false) AS owner_live,
       coalesce(n.leaving, false) AS owner_leaving,
       CASE WHEN n.lease_expires_at > now() AND NOT n.leaving THEN po.node_id ELSE s.stand_in_node_id END AS served_by,
       po.assigned_at, po.term
FROM pgsched.partition_owners po
LEFT JOIN pgsched.nodes n ON n.node_id = po.node_id
LEFT JOIN pgsched.stand_ins s ON s.node_id = po.node_id;
