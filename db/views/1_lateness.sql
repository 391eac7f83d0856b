-- lateness: the due head that has waited longest (one row; lateness 0 and
-- due_queues 0 when nothing is due). A growing lateness means the fleet
-- does not keep up, or a partition is unserved (see pgsched.partitions).
-- Heads of priority 0 and of the others are read through their own claim
-- indexes (heads_due, heads_due_prio: the predicates are in the WHERE
-- clauses; idle heads have chain 0).
CREATE OR REPLACE VIEW pgsched.lateness AS
SELECT min(d.run_at) AS oldest_due_at,
       coalesce(now() - min(d.run_at), interval '0') AS lateness,
       count(*) AS due_queues
FROM (
    SELECT h.run_at FROM pgsched.heads h
    WHERE h.chain = 0 AND NOT h.paused AND h.priority = 0 AND NOT h.running AND h.run_at <= now()
    UNION ALL
    SELECT h.run_at FROM pgsched.heads h
    WHERE h.chain = 0 AND NOT h.paused AND h.priority <> 0 AND NOT h.running AND h.run_at <= now()
) d;
