-- lateness: the due head that has waited longest (one row; lateness 0 and
-- due_queues 0 when nothing is due). A growing lateness means the fleet
-- does not keep up, or a partition is unserved (see pgsched.partitions).
CREATE OR REPLACE VIEW pgsched.lateness AS
SELECT min(h.run_at) AS oldest_due_at,
       coalesce(now() - min(h.run_at), interval '0') AS lateness,
       count(*) AS due_queues
FROM pgsched.heads h
WHERE h.chain = 0 AND NOT h.paused AND NOT h.running AND h.run_at <= now(); -- heads_due's predicate (idle heads have chain 0)
