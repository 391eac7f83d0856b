-- limits: each limited kind (pgsched.set_limit), what its limit allows and
-- what it counts now: running under the limit, started in the current
-- window, and how many of its tasks wait parked for room (due or not).
-- per_group: both bound each group apart; running and started_in_window
-- are the sums over the groups.
CREATE OR REPLACE VIEW pgsched.limits AS
SELECT l.kind, l.max_running, coalesce(u.running, 0) AS running, l.max_starts, l.per,
       CASE WHEN l.per_group
            THEN (SELECT count(*) FROM pgsched.limit_group_usage g, unnest(g.starts) s WHERE g.kind = l.kind AND s > now() - l.per)
            ELSE (SELECT count(*) FROM unnest(u.starts) s WHERE s > now() - l.per) END::integer AS started_in_window,
       coalesce(w.n, 0) AS waiting,
       p.kind IS NOT NULL AS paused,
       l.updated_at,
       l.per_group
FROM pgsched.kind_limits l
LEFT JOIN pgsched.limit_usage u ON u.kind = l.kind
LEFT JOIN pgsched.paused_kinds p ON p.kind = l.kind
LEFT JOIN (SELECT h.kind, count(*) AS n FROM pgsched.heads h WHERE h.chain = -1 AND NOT h.running GROUP BY h.kind) w
       ON w.kind = l.kind
ORDER BY l.kind;
