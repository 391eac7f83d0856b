-- kinds: per kind, the tasks pending, due, running and dead as the leader
-- last counted them (pgsched.count_kinds, every few seconds), whether the
-- kind is paused, and when the count was taken. Paused kinds with no task
-- are listed too. oldest_due_age is how long the oldest due task had
-- waited past its time when counted (the kind's wait; NULL: none due),
-- oldest_due_at the time it was due. held counts the pending heads a
-- limit holds back (pgsched.set_limit): parked until it has room.
CREATE OR REPLACE VIEW pgsched.kinds AS
SELECT coalesce(c.kind, p.kind) AS kind,
       coalesce(c.pending, 0) AS pending, coalesce(c.due, 0) AS due,
       coalesce(c.running, 0) AS running, coalesce(c.dead, 0) AS dead,
       p.kind IS NOT NULL AS paused,
       (SELECT k.counted_at FROM pgsched.kind_counted k) AS counted_at,
       c.oldest_due_at,
       (SELECT k.counted_at FROM pgsched.kind_counted k) - c.oldest_due_at AS oldest_due_age,
       coalesce(c.held, 0) AS held
FROM pgsched.kind_counts c
FULL JOIN pgsched.paused_kinds p ON p.kind = c.kind
ORDER BY 1;
