-- citus_split_partitions gives each logical partition a shard of its own
-- (see citus_distribute): it splits the single shard the task tables are
-- created with at the hash of each partition id, and places the shards on
-- the workers in contiguous blocks (partition p on worker
-- p * workers / partitions), the co-located tables' shards along. Citus
-- splits a shard only in a transaction that changed nothing else, so the
-- migrator calls it on its own after citus_distribute. Returns whether it
-- split (false: not distributed, or split already).
CREATE OR REPLACE FUNCTION pgsched.citus_split_partitions()
RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE
    cnt     integer := (SELECT partition_count FROM pgsched.settings);
    workers integer[];
BEGIN
    -- Separate checks: Citus's catalog exists only with the extension.
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN false;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'pgsched.heads'::regclass)
       OR cnt < 2 OR (SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'pgsched.heads'::regclass) > 1 THEN
        RETURN false;
    END IF;
    SELECT array_agg(d.nodeid ORDER BY d.nodeid) INTO workers FROM pg_dist_node d
    WHERE d.isactive AND d.noderole = 'primary' AND d.shouldhaveshards;
    IF workers IS NULL THEN
        RAISE EXCEPTION 'pgsched: the Citus cluster has no node to hold shards (citus_add_node)' USING ERRCODE = 'PGS01';
    END IF;
    -- Split points: every partition's hash but the largest; shard i then
    -- holds exactly the partition with the i-th smallest hash.
    PERFORM citus_split_shard_by_split_points(
        (SELECT shardid FROM pg_dist_shard WHERE logicalrelid = 'pgsched.heads'::regclass),
        (SELECT array_agg(x.h::text ORDER BY x.h) FROM (SELECT hashint4(p) AS h FROM generate_series(0, cnt - 1) AS p) x
         WHERE x.h < (SELECT max(hashint4(p)) FROM generate_series(0, cnt - 1) AS p)),
        (SELECT array_agg(workers[1 + (x.p * cardinality(workers)) / cnt] ORDER BY x.h)
         FROM (SELECT p, hashint4(p) AS h FROM generate_series(0, cnt - 1) AS p) x),
        'block_writes');
    RETURN true;
END
$$;
