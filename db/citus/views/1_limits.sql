-- limits on Citus: what db/views/1_limits.sql shows on one server (see
-- there), with running counted in heads (the kind's running tasks of
-- chain -2, see Citus's claim_limited_kind), not read from limit_usage.
CREATE OR REPLACE VIEW pgsched.limits AS
SELECT l.kind, l.max_running, coalesce(w.running, 0)::integer AS running, l.max_starts, l.per,
       CASE WHEN l.per_group
            THEN (SELECT count(*) FROM pgsched.limit_group_usage g, unnest(g.starts) s WHERE g.kind = l.kind AND s > now() - l.per)
            ELSE (SELECT count(*) FROM unnest(u.starts) s WHERE s > now() - l.per) END::integer AS started_in_window,
       coalesce(w.waiting, 0) AS waiting,
       p.kind IS NOT NULL AS paused,
       l.updated_at,
       l.per_group
FROM pgsched.kind_limits l
LEFT JOIN pgsched.limit_usage u ON u.kind = l.kind
LEFT JOIN pgsched.paused_kinds p ON p.kind = l.kind
LEFT JOIN (SELECT h.kind, count(*) FILTER (WHERE h.chain = -1 AND NOT h.running) AS waiting,
                  count(*) FILTER (WHERE h.chain = -2 AND h.running) AS running
           FROM pgsched.heads h WHERE h.chain IN (-1, -2) GROUP BY h.kind) w
       ON w.kind = l.kind
ORDER BY l.kind;
