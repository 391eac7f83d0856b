-- citus_placement: on a Citus cluster (migrate -citus), where each logical
-- partition lives (the shard of heads and its worker), which node owns it
-- and which node serves it, so an operator sees that a node's partitions
-- sit on few workers. Empty on a single PostgreSQL.
CREATE OR REPLACE VIEW pgsched.citus_placement AS
SELECT * FROM pgsched.citus_partitions();
