-- limit_sweep on a Citus-distributed schema: nothing to sweep. Limits are
-- refused there (see set_limit), so no head is ever parked, and the
-- single-server sweep's loose scan of parked heads would be a multi-shard
-- statement on every leader round for nothing.
CREATE OR REPLACE FUNCTION pgsched.limit_sweep()
RETURNS integer
LANGUAGE sql
AS $$
SELECT 0
$$;
