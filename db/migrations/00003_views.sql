-- Views for a person with psql: what is pending (per kind and partition),
-- what runs where, what died, and how late the oldest due task is. The
-- cluster's own views (cluster, partitions, stand_ins) are in 00002.

-- +goose Up
-- pending: per kind and partition, how many tasks wait, how many of them are
-- due now, and the earliest run time.
CREATE VIEW pgsched.pending AS
SELECT t.kind, t.partition_id,
       count(*) AS pending,
       count(*) FILTER (WHERE t.run_at <= now()) AS due,
       min(t.run_at) AS next_run_at
FROM pgsched.tasks t
WHERE t.state = 'pending'
GROUP BY t.kind, t.partition_id;

-- running: every running task with the node running it, for how long, and
-- whether that node's lease (under the epoch it claimed with) is still live;
-- a task whose lease is not live goes back to its queue when its node's
-- stand-in or the leader next looks.
CREATE VIEW pgsched.running AS
SELECT h.partition_id, h.ordering_id, h.scheduled_at, h.uniqueness_key, h.id, h.kind, h.attempt,
       h.node_id, h.epoch, h.claimed_at, now() - h.claimed_at AS running_for,
       coalesce(n.epoch = h.epoch AND n.lease_expires_at > now(), false) AS lease_live
FROM pgsched.heads h
LEFT JOIN pgsched.nodes n ON n.node_id = h.node_id
WHERE h.running;

-- dead: tasks that failed permanently or ran out of attempts, newest first.
CREATE VIEW pgsched.dead AS
SELECT d.died_at, d.kind, d.ordering_id, d.scheduled_at, d.uniqueness_key, d.attempt, d.last_error,
       d.node_id, d.partition_id, d.id, d.payload
FROM pgsched.dead_tasks d
ORDER BY d.died_at DESC;

-- lateness: the due head that has waited longest (one row; lateness 0 and
-- due_queues 0 when nothing is due). A growing lateness means the fleet
-- does not keep up, or a partition is unserved (see pgsched.partitions).
CREATE VIEW pgsched.lateness AS
SELECT min(h.run_at) AS oldest_due_at,
       coalesce(now() - min(h.run_at), interval '0') AS lateness,
       count(*) AS due_queues
FROM pgsched.heads h
WHERE h.chain = 0 AND NOT h.running AND h.run_at <= now(); -- chain = 0: heads_due (idle heads have chain 0)

-- +goose Down
DROP VIEW pgsched.lateness, pgsched.dead, pgsched.running, pgsched.pending;
