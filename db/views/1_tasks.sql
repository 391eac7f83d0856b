-- tasks: every pending and running task, heads and backlog together, for
-- people with psql. head says whether it is its ordering_id's next;
-- priority (higher runs first) and group_key (NULL: none) come last.
CREATE OR REPLACE VIEW pgsched.tasks AS
SELECT h.partition_id, h.ordering_id, h.scheduled_at, h.uniqueness_key, h.id, h.kind, h.payload,
       CASE WHEN h.running THEN 'running' ELSE 'pending' END AS state,
       h.run_at, h.attempt, h.revision, h.last_error, h.node_id, h.epoch, h.claimed_at, h.created_at,
       true AS head, h.priority, h.group_key
FROM pgsched.heads h
UNION ALL
SELECT b.partition_id, b.ordering_id, b.scheduled_at, b.uniqueness_key, b.id, b.kind, b.payload,
       'pending', b.run_at, b.attempt, b.revision, b.last_error, NULL, NULL, NULL, b.created_at,
       false, b.priority, b.group_key
FROM pgsched.backlog b;
