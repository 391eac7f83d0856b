-- partition_of maps an ordering_id to its logical partition: the first 32
-- bits of md5 over the UTF-8 bytes, modulo the partition count. The Go
-- client computes the same (internal/partition).
CREATE OR REPLACE FUNCTION pgsched.partition_of(ordering_id text, partition_count integer)
RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT ((('x' || substr(md5(ordering_id), 1, 8))::bit(32)::bigint) % partition_count)::integer $$;
