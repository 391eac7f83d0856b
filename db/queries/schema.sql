-- SchemaVersion is the newest migration applied to the schema, as goose
-- reads it (internal/schemaversion): a worker refuses a schema newer than
-- its build.
-- name: SchemaVersion :one
SELECT coalesce(max(v.version_id), 0)::bigint AS version FROM pgsched.goose_db_version v;

-- SchemaDistributed says whether the schema is distributed over Citus: the
-- migrator has then given it Citus's functions, citus_routes among them.
-- name: SchemaDistributed :one
SELECT (to_regprocedure('pgsched.citus_routes()') IS NOT NULL)::boolean AS distributed;
