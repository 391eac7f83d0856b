-- grant_roles keeps the schema's privileges least: nobody but the owner may
-- call its functions (EXECUTE is revoked from PUBLIC, which PostgreSQL grants
-- it by default), and, when the three roles exist (p_create makes them, as
-- `migrate -roles` does), each gets what its job needs and no more:
--
--   <schema>_enqueue  the enqueue functions only: schedule, schedule_many,
--                     cancel, reschedule and recurring_upsert, _pause,
--                     _resume, _delete. They are SECURITY DEFINER with a
--                     fixed search_path, so the role needs no table access.
--   <schema>_worker   what a worker does: every table's rows (but
--                     partition_anchor's, which it only reads), the
--                     sequences, every function (completion partitions are
--                     created and dropped by ensure_completion_partitions,
--                     SECURITY DEFINER, so it need not own the schema).
--   <schema>_read     SELECT on the views (and partition_of,
--                     citus_partitions and recurring_ticks, which views
--                     call with their reader's rights), task_output
--                     (SECURITY DEFINER: a task's result by key), and what
--                     grant_reader adds (on Citus, the tables).
--
-- The migrator calls it after every change to the SQL objects, since a
-- function dropped and created anew, a new table or a new view starts with
-- default privileges. Returns whether the roles exist.
CREATE OR REPLACE FUNCTION pgsched.grant_roles(p_create boolean)
RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE
    s   text := split_part('pgsched.grant_roles', '.', 1);
    enq text := s || '_enqueue';
    wrk text := s || '_worker';
    rd  text := s || '_read';
    r   text;
BEGIN
    EXECUTE format('REVOKE ALL ON ALL FUNCTIONS IN SCHEMA %I FROM PUBLIC', s);
    IF p_create THEN
        FOREACH r IN ARRAY ARRAY[enq, wrk, rd] LOOP
            IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r);
            END IF;
        END LOOP;
    END IF;
    IF (SELECT count(*) FROM pg_roles WHERE rolname IN (enq, wrk, rd)) < 3 THEN
        RETURN false;
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I, %I, %I', s, enq, wrk, rd);
    FOR r IN
        SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = s AND p.proname IN ('schedule', 'schedule_many', 'cancel', 'reschedule',
                                              'recurring_upsert', 'recurring_pause', 'recurring_resume', 'recurring_delete')
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', r, enq);
    END LOOP;
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %I TO %I', s, wrk);
    -- partition_anchor's rows are the migration's: an insert on Citus
    -- that finds no row for its partition inserts nothing.
    EXECUTE format('REVOKE INSERT, UPDATE, DELETE ON %I.partition_anchor FROM %I', s, wrk);
    EXECUTE format('GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA %I TO %I', s, wrk);
    EXECUTE format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA %I TO %I', s, wrk);
    FOR r IN SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = s AND c.relkind = 'v'
    LOOP
        EXECUTE format('GRANT SELECT ON %I.%I TO %I', s, r, rd);
    END LOOP;
    -- A view's functions run with its reader's rights: partition_of only
    -- computes; recurring_ticks (recurring) reads as its owner;
    -- citus_partitions (citus_placement) only reads Citus's catalog.
    FOR r IN SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
             WHERE n.nspname = s AND p.proname IN ('partition_of', 'citus_partitions', 'recurring_ticks', 'task_output')
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', r, rd);
    END LOOP;
    PERFORM pgsched.grant_reader(rd);
    RETURN true;
END
$$;
