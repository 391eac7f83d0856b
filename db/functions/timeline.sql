-- timeline is the timeline of the PostgreSQL server running it: 1 on a new
-- cluster, one more after each promotion of a standby or point-in-time
-- recovery, read from the name of the WAL file being written (the
-- checkpoint's timeline lags a promotion until the next checkpoint). A
-- node's term is valid only on the timeline it registered on (see
-- node_register). On Citus it is 0: each server there has a timeline of
-- its own and a claim runs on a worker, so the check is left out.
--
-- STABLE: no statement outlives a timeline (a promotion ends the old
-- primary, and a standby takes no writes), and Citus plans a claim whose
-- filter calls a VOLATILE function in steps, which it cannot do for a
-- claim's UPDATE by ctid. PL/pgSQL, not SQL: a SQL function that calls a
-- VOLATILE one is never inlined, so each call would parse and plan its
-- body again, where PL/pgSQL keeps the plan for the session.
CREATE OR REPLACE FUNCTION pgsched.timeline()
RETURNS integer
LANGUAGE plpgsql
STABLE
AS $$
BEGIN
    RETURN ('x' || left(pg_walfile_name(pg_current_wal_lsn()), 8))::bit(32)::integer;
END
$$;
