-- throughput: per minute, newest first, the outcomes every node recorded
-- (completed, retried, dead; snoozed: run again later without using an
-- attempt) and the start lateness of first attempts (mean and worst, in
-- seconds). Kept for a day.
CREATE OR REPLACE VIEW pgsched.throughput AS
SELECT m.minute,
       sum(m.completed) AS completed, sum(m.retried) AS retried, sum(m.dead) AS dead,
       sum(m.started) AS started,
       CASE WHEN sum(m.started) > 0 THEN sum(m.lateness_sum) / sum(m.started) END AS lateness_mean_seconds,
       max(m.lateness_max) AS lateness_max_seconds,
       count(*) AS nodes,
       sum(m.snoozed) AS snoozed
FROM pgsched.stats_minutes m
GROUP BY m.minute
ORDER BY m.minute DESC;
