-- retry_dead_where puts every dead task the filters select (see dead_ids)
-- back in line in one statement and returns how many.
CREATE OR REPLACE FUNCTION pgsched.retry_dead_where(kind text DEFAULT NULL, ordering_id text DEFAULT NULL,
                                                    died_after timestamptz DEFAULT NULL, died_before timestamptz DEFAULT NULL)
RETURNS integer
LANGUAGE sql AS $$
    SELECT pgsched.retry_dead_ids(pgsched.dead_ids(retry_dead_where.kind, retry_dead_where.ordering_id,
                                                   retry_dead_where.died_after, retry_dead_where.died_before))
$$;
