-- citus_partitions lists, on a Citus cluster, each logical partition's
-- shard of heads, the worker (host:port) holding it, its owner and who
-- serves it now; no rows without Citus or before the schema is
-- distributed. A function so the view works where Citus's catalog does
-- not exist.
CREATE OR REPLACE FUNCTION pgsched.citus_partitions()
RETURNS TABLE (partition_id integer, shard_id bigint, worker text, owner_node_id text, served_by text)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'pgsched.heads'::regclass) THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT x.p, x.shard, d.nodename || ':' || d.nodeport, pp.owner_node_id::text, pp.served_by::text
    FROM (SELECT p, get_shard_id_for_distribution_column('pgsched.heads', p) AS shard
          FROM generate_series(0, (SELECT s.partition_count - 1 FROM pgsched.settings s)) AS p) x
    JOIN pg_dist_placement pl ON pl.shardid = x.shard
    JOIN pg_dist_node d ON d.groupid = pl.groupid
    LEFT JOIN pgsched.partitions pp ON pp.partition_id = x.p;
END
$$;
