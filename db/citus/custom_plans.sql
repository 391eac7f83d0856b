-- On Citus a statement is routed to the worker holding its partition only
-- when its plan shows the partition as a value: these functions, each of
-- whose statements filters one partition by a variable, plan every call
-- afresh (custom plans; on one server they keep PostgreSQL's default, or
-- claim_due_many's generic plan). The migrator runs this after the
-- functions on a schema distributed over Citus. The Citus forms of
-- schedule_many, finish_tasks, settle_heads, lock_heads and queue_next_due
-- say the same in their own files.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = split_part('pgsched.custom_plans', '.', 1)
          AND p.proname IN ('cancel', 'cancel_requests_prune', 'cancel_running', 'claim_due_many', 'claim_limited_kind', 'clear_limit', 'dead_ids',
                            'delete_dead', 'delete_dead_where', 'limit_sweep', 'lock_head', 'pause_kind', 'pause_sweep',
                            'recurring_drop_ticks', 'recurring_materialize', 'recurring_ticks', 'reschedule', 'rescue_expired',
                            'resume_kind', 'retry_dead_ids', 'set_limit', 'task_output')
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_custom_plan', f);
    END LOOP;
END
$$;
