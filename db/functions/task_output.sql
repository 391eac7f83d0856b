-- task_output is the result the handler of a completed task recorded
-- (Job.RecordOutput), by the task's key: NULL when the task completed
-- without one, and also when no completion of that key is remembered
-- (never completed, or longer ago than the retention window: the
-- pgsched.tasks and pgsched.dead views show where else a key may be). The
-- latest completion wins when a key completed more than once.
CREATE OR REPLACE FUNCTION pgsched.task_output(ordering_id text, scheduled_at timestamptz, uniqueness_key text DEFAULT '')
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p integer := pgsched.partition_of(ordering_id, (SELECT s.partition_count FROM pgsched.settings s));
BEGIN
    RETURN (SELECT c.output FROM pgsched.completions c
            WHERE c.partition_id = p AND c.ordering_id = task_output.ordering_id
              AND c.scheduled_at = task_output.scheduled_at AND c.uniqueness_key = task_output.uniqueness_key
            ORDER BY c.completed_at DESC LIMIT 1);
END
$$;
