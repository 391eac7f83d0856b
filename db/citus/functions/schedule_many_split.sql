-- schedule_many_split is schedule_many on Citus for a batch spanning
-- partitions (parts: each position's partition): one call per partition,
-- in partition order (keys stay locked in key order), in the caller's
-- transaction, each routed whole; the results go back to their positions.
CREATE OR REPLACE FUNCTION pgsched.schedule_many_split(parts integer[], ordering_ids text[], scheduled_ats timestamptz[],
                                                       uniqueness_keys text[], payloads jsonb[], kinds text[], new_keys boolean,
                                                       traceparents text[], priorities integer[], group_keys text[])
RETURNS text[]
LANGUAGE plpgsql
AS $$
DECLARE
    q       record;
    sub     text[];
    results text[] := array_fill(NULL::text, ARRAY[cardinality(parts)]);
BEGIN
    FOR q IN SELECT x.p, array_agg(x.i ORDER BY x.i) AS pos FROM unnest(parts) WITH ORDINALITY AS x(p, i) GROUP BY x.p ORDER BY x.p LOOP
        sub := pgsched.schedule_many(
            ARRAY(SELECT ordering_ids[j] FROM unnest(q.pos) AS j),
            ARRAY(SELECT scheduled_ats[j] FROM unnest(q.pos) AS j),
            CASE WHEN uniqueness_keys IS NOT NULL THEN ARRAY(SELECT uniqueness_keys[j] FROM unnest(q.pos) AS j) END,
            CASE WHEN payloads IS NOT NULL THEN ARRAY(SELECT payloads[j] FROM unnest(q.pos) AS j) END,
            CASE WHEN kinds IS NOT NULL THEN ARRAY(SELECT kinds[j] FROM unnest(q.pos) AS j) END,
            new_keys, CASE WHEN traceparents IS NOT NULL THEN ARRAY(SELECT traceparents[j] FROM unnest(q.pos) AS j) END,
            CASE WHEN priorities IS NOT NULL THEN ARRAY(SELECT priorities[j] FROM unnest(q.pos) AS j) END,
            CASE WHEN group_keys IS NOT NULL THEN ARRAY(SELECT group_keys[j] FROM unnest(q.pos) AS j) END);
        FOR k IN 1 .. cardinality(q.pos) LOOP
            results[q.pos[k]] := sub[k];
        END LOOP;
    END LOOP;
    RETURN results;
END
$$;
