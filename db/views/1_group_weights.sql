-- group_weights: the groups given a weight in their kind's fair share
-- (pgsched.set_group_weight); every other group has weight 1. limited
-- says whether the kind has a limit now: without one, weights wait.
CREATE OR REPLACE VIEW pgsched.group_weights AS
SELECT w.kind, w.group_key, w.weight, EXISTS (SELECT 1 FROM pgsched.kind_limits l WHERE l.kind = w.kind) AS limited, w.updated_at
FROM pgsched.limit_group_weights w
ORDER BY w.kind, w.group_key;
