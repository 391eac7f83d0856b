-- limits: each limited kind (pgsched.set_limit), what its limit allows and
-- what it counts now: running under the limit, started in the current
-- window, and how many of its tasks wait parked for room (due or not).
CREATE OR REPLACE VIEW pgsched.limits AS
SELECT l.kind, l.max_running, coalesce(u.running, 0) AS running, l.max_starts, l.per,
       (SELECT count(*) FROM unnest(u.starts) s WHERE s > now() - l.per)::integer AS started_in_window,
       (SELECT count(*) FROM pgsched.heads h WHERE h.chain = -1 AND NOT h.running AND h.kind = l.kind) AS waiting,
       EXISTS (SELECT 1 FROM pgsched.paused_kinds k WHERE k.kind = l.kind) AS paused,
       l.updated_at
FROM pgsched.kind_limits l
LEFT JOIN pgsched.limit_usage u ON u.kind = l.kind
ORDER BY l.kind;
