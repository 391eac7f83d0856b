-- key_error says why (ordering_id, scheduled_at, uniqueness_key) cannot be
-- a task's key, naming the field in schedule_many's words, or NULL. cancel,
-- cancel_running and reschedule ask it only once they found no task, so
-- that a caller learns which field is wrong instead of "no pending task",
-- at no cost to a key that is valid.
CREATE OR REPLACE FUNCTION pgsched.key_error(ordering_id text, scheduled_at timestamptz, uniqueness_key text)
RETURNS text
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE
        WHEN ordering_id IS NULL OR ordering_id = '' THEN 'ordering_id is required'
        WHEN octet_length(ordering_id) > 255
            THEN format('ordering_id is %s bytes, over the limit of 255', octet_length(ordering_id))
        WHEN octet_length(uniqueness_key) > 255
            THEN format('uniqueness_key is %s bytes, over the limit of 255', octet_length(uniqueness_key))
        ELSE pgsched.time_error('scheduled_at', scheduled_at)
    END
$$;
