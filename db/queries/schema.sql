-- SchemaVersion is the newest migration applied to the schema, as goose
-- reads it (internal/schemaversion): a worker refuses a schema newer than
-- its build.
-- name: SchemaVersion :one
SELECT coalesce(max(v.version_id), 0)::bigint AS version FROM pgsched.goose_db_version v;
