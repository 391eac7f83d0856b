-- set_limit on a Citus-distributed schema: refused. A limit's usage row
-- is changed by every claim and finish of the kind, in the statement that
-- claims or finishes; on Citus those statements run on the workers, where
-- a reference table cannot be written. Until that is built (a usage row
-- per worker, or claims of limited kinds routed through the coordinator),
-- a limit there is refused rather than kept loosely.
CREATE OR REPLACE FUNCTION pgsched.set_limit(kind text, max_running integer DEFAULT NULL, max_starts integer DEFAULT NULL,
                                  per interval DEFAULT NULL, per_group boolean DEFAULT false)
RETURNS boolean
LANGUAGE plpgsql
AS $$
BEGIN
    RAISE EXCEPTION USING MESSAGE = 'pgsched: limits are not available on a Citus-distributed schema yet', ERRCODE = 'PGS01';
END
$$;
