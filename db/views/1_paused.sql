-- paused: the kinds no node starts (pgsched.pause_kind), since when, and
-- how many of their heads wait marked paused (heads written since the
-- pause are marked by the leader now and then).
CREATE OR REPLACE VIEW pgsched.paused AS
SELECT k.kind, k.paused_at,
       (SELECT count(*) FROM pgsched.heads h WHERE h.paused AND h.kind = k.kind) AS waiting_heads
FROM pgsched.paused_kinds k
ORDER BY k.kind;
