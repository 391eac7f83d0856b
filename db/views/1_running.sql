-- running: every running task with the node running it, for how long, and
-- whether that node's lease (under the epoch it claimed with) is still live;
-- a task whose lease is not live goes back to its queue when its node's
-- stand-in or the leader next looks.
CREATE OR REPLACE VIEW pgsched.running AS
SELECT h.partition_id, h.ordering_id, h.scheduled_at, h.uniqueness_key, h.id, h.kind, h.attempt,
       h.node_id, h.epoch, h.claimed_at, now() - h.claimed_at AS running_for,
       coalesce(n.epoch = h.epoch AND n.lease_expires_at > now(), false) AS lease_live
FROM pgsched.heads h
LEFT JOIN pgsched.nodes n ON n.node_id = h.node_id
WHERE h.running;
