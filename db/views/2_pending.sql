-- pending: per kind and partition, how many tasks wait, how many of them are
-- due now, and the earliest run time.
CREATE OR REPLACE VIEW pgsched.pending AS
SELECT t.kind, t.partition_id,
       count(*) AS pending,
       count(*) FILTER (WHERE t.run_at <= now()) AS due,
       min(t.run_at) AS next_run_at
FROM pgsched.tasks t
WHERE t.state = 'pending'
GROUP BY t.kind, t.partition_id;
