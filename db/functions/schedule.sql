-- schedule enqueues one task; see schedule_many. traceparent: the W3C
-- trace context of the caller's span, for the run's span to link to
-- (docs/tracing.md); NULL or '' for none. priority: higher runs first;
-- group_key: the task's group, NULL or '' for none.
CREATE OR REPLACE FUNCTION pgsched.schedule(
    ordering_id    text,
    scheduled_at   timestamptz,
    uniqueness_key text DEFAULT '',
    payload        jsonb DEFAULT '{}',
    kind           text DEFAULT 'default',
    traceparent    text DEFAULT NULL,
    priority       integer DEFAULT 0,
    group_key      text DEFAULT NULL
)
RETURNS text
LANGUAGE sql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT (pgsched.schedule_many(
        ARRAY[ordering_id], ARRAY[scheduled_at], ARRAY[uniqueness_key], ARRAY[payload], ARRAY[kind], false,
        CASE WHEN traceparent IS NOT NULL THEN ARRAY[traceparent] END,
        CASE WHEN priority <> 0 THEN ARRAY[priority] END, CASE WHEN group_key IS NOT NULL THEN ARRAY[group_key] END))[1]
$$;
