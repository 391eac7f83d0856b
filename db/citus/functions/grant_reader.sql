-- grant_reader gives the read role what it needs beyond the views and the
-- functions they call (see grant_roles). Citus runs a view's statements on
-- the shards as the view's reader, not as its owner: the reader reads the
-- tables (and may still change nothing).
CREATE OR REPLACE FUNCTION pgsched.grant_reader(p_role text)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA %I TO %I', split_part('pgsched.grant_reader', '.', 1), p_role);
END
$$;
