-- schedule enqueues one task; see schedule_many.
CREATE OR REPLACE FUNCTION pgsched.schedule(
    ordering_id    text,
    scheduled_at   timestamptz,
    uniqueness_key text DEFAULT '',
    payload        jsonb DEFAULT '{}',
    kind           text DEFAULT 'default'
)
RETURNS text
LANGUAGE sql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT (pgsched.schedule_many(
        ARRAY[ordering_id], ARRAY[scheduled_at], ARRAY[uniqueness_key], ARRAY[payload], ARRAY[kind]))[1]
$$;
