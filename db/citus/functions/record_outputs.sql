-- record_outputs on Citus: what db/functions/record_outputs.sql does on
-- one server (see there), each UPDATE built with its values as literals.
-- Citus 13's coordinator crashed (signal 11) planning that file's UPDATE
-- of the distributed, range-partitioned completions from PL/pgSQL
-- variables (custom plans, the partition a value); a statement of
-- constants is routed to the partition's worker like any other.
CREATE OR REPLACE FUNCTION pgsched.record_outputs(partition_ids integer[], ordering_ids text[], scheduled_ats timestamptz[],
                                                  uniqueness_keys text[], outputs jsonb[])
RETURNS integer
LANGUAGE plpgsql
SET jit = off
AS $$
DECLARE
    n   integer := 0;
    got integer;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(partition_ids), 0) LOOP
        EXECUTE format('UPDATE pgsched.completions c SET output = %L::jsonb
                        WHERE c.partition_id = %s AND c.ordering_id = %L AND c.scheduled_at = %L::timestamptz
                          AND c.uniqueness_key = %L AND c.completed_at = %L::timestamptz AND c.output IS NULL',
                       outputs[i], partition_ids[i], ordering_ids[i], scheduled_ats[i], uniqueness_keys[i], now());
        GET DIAGNOSTICS got = ROW_COUNT;
        n := n + got;
    END LOOP;
    RETURN n;
END
$$;
