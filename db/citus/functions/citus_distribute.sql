-- citus_distribute spreads the schema over a Citus cluster (migrate
-- -citus): the task tables (heads, backlog, completions, dead_tasks) are
-- distributed by partition_id, co-located, with exactly one shard per
-- logical partition, so every row of a partition lives on one worker; so
-- is partition_anchor (a row per partition, which lets an INSERT ...
-- SELECT of a batch's rows be routed whole).
-- Hash distribution with as many shards as partitions would put several
-- partitions in one shard and leave others empty (16 partitions landed in
-- 11 shards), so the tables start as one shard that is split at the hash
-- of each partition id; the shards go to the workers in contiguous blocks
-- (partition p on worker p * workers / partitions), and the leader hands
-- partitions to nodes in contiguous runs, so a node's partitions live on
-- as few workers as possible (pgsched.citus_placement shows where). The small
-- cluster tables (settings, nodes, leases, ownership, pauses, cancel
-- requests, recurring schedules, the console's counts and history) become
-- reference tables, copied to every worker, so a statement on one
-- partition joins them locally. Completion partitions created later
-- (ensure_completion_partitions) are distributed as they are attached.
--
-- The migrator calls it after every Up: with p_force it distributes
-- (refusing when the citus extension is missing); without, it distributes
-- what a later migration added when the schema is distributed already,
-- and does nothing otherwise. Returns the number of tables it distributed.
-- The split into one shard per partition is citus_split_partitions, which
-- Citus allows only in a transaction of its own.
CREATE OR REPLACE FUNCTION pgsched.citus_distribute(p_force boolean)
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    s   text := split_part('pgsched.citus_distribute', '.', 1);
    n   integer := 0;
    t   text;
    cnt integer := (SELECT partition_count FROM pgsched.settings);
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        IF p_force THEN
            RAISE EXCEPTION 'pgsched: -citus needs the citus extension in this database (CREATE EXTENSION citus on the coordinator and every worker)'
                USING ERRCODE = 'PGS01';
        END IF;
        RETURN 0;
    END IF;
    IF NOT p_force AND NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'pgsched.heads'::regclass) THEN
        RETURN 0;
    END IF;
    -- A limit counts its kind's running tasks in heads on Citus
    -- (claim_limited_kind): this index keeps the count to them, however
    -- many tasks wait. Made before heads is distributed, so its shards
    -- have it; on a schema distributed before it existed, Citus makes it on
    -- every shard.
    IF to_regclass(format('%I.heads_limited_running', s)) IS NULL THEN
        EXECUTE format('CREATE INDEX heads_limited_running ON %I.heads (kind, (coalesce(group_key, %L))) WHERE chain = -2', s, '');
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'pgsched.heads'::regclass) THEN
        PERFORM create_distributed_table('pgsched.heads', 'partition_id', shard_count => 1, colocate_with => 'none');
        PERFORM truncate_local_data_after_distributing_table('pgsched.heads');
        n := n + 1;
    END IF;
    FOREACH t IN ARRAY ARRAY['backlog', 'completions', 'dead_tasks', 'partition_anchor'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = format('%I.%I', s, t)::regclass) THEN
            PERFORM create_distributed_table(format('%I.%I', s, t), 'partition_id', colocate_with => 'pgsched.heads');
            PERFORM truncate_local_data_after_distributing_table(format('%I.%I', s, t));
            n := n + 1;
        END IF;
    END LOOP;
    FOR t IN
        SELECT c.relname FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace
        WHERE ns.nspname = s AND c.relkind IN ('r', 'p') AND NOT c.relispartition
          AND c.relname NOT IN ('heads', 'backlog', 'completions', 'dead_tasks', 'partition_anchor', 'goose_db_version', 'sql_objects')
          AND NOT EXISTS (SELECT 1 FROM pg_dist_partition d WHERE d.logicalrelid = c.oid)
        ORDER BY c.relname
    LOOP
        PERFORM create_reference_table(format('%I.%I', s, t));
        PERFORM truncate_local_data_after_distributing_table(format('%I.%I', s, t));
        n := n + 1;
    END LOOP;
    RETURN n;
END
$$;
