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
SELECT t.partition_id, t.ordering_id, t.scheduled_at, t.uniqueness_key, t.id, t.kind, t.attempt,
       t.node_id, t.epoch, t.claimed_at, now() - t.claimed_at AS running_for,
       coalesce(n.epoch = t.epoch AND n.lease_expires_at > now(), false) AS lease_live
FROM pgsched.tasks t
LEFT JOIN pgsched.nodes n ON n.node_id = t.node_id
WHERE t.state = 'running';

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
SELECT min(q.next_at) AS oldest_due_at,
       coalesce(now() - min(q.next_at), interval '0') AS lateness,
       count(*) AS due_queues
FROM pgsched.queues q
WHERE NOT q.running AND q.next_at <= now();

-- +goose Down
DROP VIEW pgsched.lateness, pgsched.dead, pgsched.running, pgsched.pending;
