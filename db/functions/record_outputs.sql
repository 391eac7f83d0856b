-- record_outputs stores handlers' results with the completion records
-- finish_tasks wrote in the same transaction (completed_at is the
-- transaction's now()), so an output is kept only if its task's completion
-- was: a fenced outcome, which wrote no completion, stores no output
-- either. Called only for batches that carry outputs; one statement per
-- task, each naming its partition (routed on Citus). Returns how many
-- outputs were stored.
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
        UPDATE pgsched.completions c SET output = outputs[i]
        WHERE c.partition_id = partition_ids[i] AND c.ordering_id = ordering_ids[i] AND c.scheduled_at = scheduled_ats[i]
          AND c.uniqueness_key = uniqueness_keys[i] AND c.completed_at = now() AND c.output IS NULL;
        GET DIAGNOSTICS got = ROW_COUNT;
        n := n + got;
    END LOOP;
    RETURN n;
END
$$;
