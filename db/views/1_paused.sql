-- paused: the kinds no node starts (pgsched.pause_kind), since when, and
-- how many of their heads wait marked paused (heads written since the
-- pause are marked by the leader now and then).
CREATE OR REPLACE VIEW pgsched.paused AS
SELECT k.kind, k.paused_at, coalesce(w.n, 0) AS waiting_heads
FROM pgsched.paused_kinds k
LEFT JOIN (SELECT h.kind, count(*) AS n FROM pgsched.heads h WHERE h.paused GROUP BY h.kind) w ON w.kind = k.kind
ORDER BY k.kind;
