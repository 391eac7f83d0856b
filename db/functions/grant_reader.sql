-- grant_reader gives the read role what it needs beyond the views and the
-- functions they call (see grant_roles): on one PostgreSQL nothing, since
-- a view reads the tables with its owner's rights.
CREATE OR REPLACE FUNCTION pgsched.grant_reader(p_role text)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
END
$$;
