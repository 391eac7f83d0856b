-- dead: tasks that failed permanently or ran out of attempts, newest first.
CREATE OR REPLACE VIEW pgsched.dead AS
SELECT d.died_at, d.kind, d.ordering_id, d.scheduled_at, d.uniqueness_key, d.attempt, d.last_error,
       d.node_id, d.partition_id, d.id, d.payload, d.priority, d.group_key
FROM pgsched.dead_tasks d
ORDER BY d.died_at DESC;
