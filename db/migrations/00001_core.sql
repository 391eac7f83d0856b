-- Core storage of pgsched: pending tasks, ordering queues, completion
-- tombstones, dead tasks and node leases, plus the SQL API that Go and psql
-- users share (schedule, schedule_many, cancel, reschedule).
--
-- Every object lives in the schema named "pgsched" here; the migrator
-- rewrites that name when a different schema is chosen at migrate time, and
-- reads the partition count from the setting pgsched.partition_count.

-- +goose Up
CREATE SCHEMA IF NOT EXISTS pgsched;

CREATE TABLE pgsched.settings (
    singleton            boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    partition_count      integer  NOT NULL CHECK (partition_count BETWEEN 1 AND 4096),
    -- Physical partitions of tasks and queues; logical partition p lives in
    -- table partition p % table_partitions. See the note at tasks_p*.
    table_partitions     integer  NOT NULL CHECK (table_partitions BETWEEN 1 AND partition_count),
    grace                interval NOT NULL DEFAULT '5 seconds',
    completion_retention interval NOT NULL DEFAULT '7 days',
    max_payload_bytes    integer  NOT NULL DEFAULT 1048576 CHECK (max_payload_bytes > 0),
    notify_horizon       interval NOT NULL DEFAULT '10 seconds'
);

-- +goose StatementBegin
DO $$
DECLARE
    n integer := coalesce(nullif(current_setting('pgsched.partition_count', true), ''), '64')::integer;
    t integer := coalesce(nullif(current_setting('pgsched.table_partitions', true), ''), '8')::integer;
BEGIN
    INSERT INTO pgsched.settings (partition_count, table_partitions) VALUES (n, least(t, n));
END
$$;
-- +goose StatementEnd

-- partition_of maps an ordering_id to its logical partition: the first 32
-- bits of md5 over the UTF-8 bytes, modulo the partition count. The Go
-- client computes the same (internal/partition).
CREATE FUNCTION pgsched.partition_of(ordering_id text, partition_count integer)
RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT ((('x' || substr(md5(ordering_id), 1, 8))::bit(32)::bigint) % partition_count)::integer $$;

CREATE SEQUENCE pgsched.task_id_seq CACHE 64;

-- Pending and running tasks. Partitioned by logical partition, which is a
-- function of ordering_id and so never changes with a task's state. Keys
-- are compared bytewise (COLLATE "C"): they are identifiers, and indexes on
-- them must not depend on the operating system's locale, whose rules can
-- change under an index with a C library upgrade.
CREATE TABLE pgsched.tasks (
    partition_id   integer     NOT NULL,
    ordering_id    text COLLATE "C" NOT NULL,
    scheduled_at   timestamptz NOT NULL,
    uniqueness_key text COLLATE "C" NOT NULL DEFAULT '',
    id             bigint      NOT NULL DEFAULT nextval('pgsched.task_id_seq'),
    kind           text        NOT NULL DEFAULT 'default',
    payload        jsonb       NOT NULL DEFAULT '{}',
    state          text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'running')),
    run_at         timestamptz NOT NULL,
    attempt        integer     NOT NULL DEFAULT 0,
    revision       integer     NOT NULL DEFAULT 0, -- times overwritten by schedule
    last_error     text,
    node_id        text,
    epoch          bigint,
    claimed_at     timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, ordering_id, scheduled_at, uniqueness_key),
    CHECK (octet_length(ordering_id) BETWEEN 1 AND 255),
    CHECK (octet_length(uniqueness_key) <= 255),
    CHECK (octet_length(kind) BETWEEN 1 AND 255)
) PARTITION BY LIST (partition_id);

-- The database's own backstop: at most one running task per ordering_id.
CREATE UNIQUE INDEX tasks_one_running ON pgsched.tasks (partition_id, ordering_id) WHERE state = 'running';

-- One row per ordering_id that has tasks: the serialisation point for that
-- ordering_id and the claim index. (head_scheduled_at, head_uniqueness_key)
-- is the key of its head (earliest task by scheduled_at, then enqueue order),
-- so a claim reaches the head task with one primary-key probe; next_at is
-- when the head may run; running means its head runs.
CREATE TABLE pgsched.queues (
    partition_id        integer     NOT NULL,
    ordering_id         text COLLATE "C" NOT NULL,
    head_scheduled_at   timestamptz NOT NULL,
    head_uniqueness_key text COLLATE "C" NOT NULL,
    next_at             timestamptz NOT NULL,
    running           boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (partition_id, ordering_id)
) PARTITION BY LIST (partition_id);

CREATE INDEX queues_due ON pgsched.queues (partition_id, next_at) WHERE NOT running;

-- The tables are partitioned by logical partition, but each table
-- partition holds every table_partitions-th logical partition (default 8).
-- A statement that cannot prune at plan time (a cached generic plan, a
-- batch spanning partitions) locks and initialises every table partition:
-- with one table partition per logical partition (64) that fixed cost
-- dominated claims and outcome batches (start lateness p99 ~200 ms against
-- ~15 ms with 8). Ownership, claiming and Citus distribution stay per
-- logical partition; every statement still filters on partition_id.
-- +goose StatementBegin
DO $$
DECLARE
    n integer := (SELECT partition_count FROM pgsched.settings);
    t integer := (SELECT table_partitions FROM pgsched.settings);
    vals text;
BEGIN
    FOR i IN 0 .. t - 1 LOOP
        SELECT string_agg(p::text, ', ' ORDER BY p) INTO vals FROM generate_series(i, n - 1, t) AS p;
        EXECUTE format('CREATE TABLE pgsched.tasks_p%s PARTITION OF pgsched.tasks FOR VALUES IN (%s)', i, vals);
        EXECUTE format('CREATE TABLE pgsched.queues_p%s PARTITION OF pgsched.queues FOR VALUES IN (%s)', i, vals);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- Completion tombstones: a completed key never runs again. Partitioned by
-- day of completion and dropped whole past the retention window.
CREATE TABLE pgsched.completions (
    partition_id   integer     NOT NULL,
    ordering_id    text COLLATE "C" NOT NULL,
    scheduled_at   timestamptz NOT NULL,
    uniqueness_key text COLLATE "C" NOT NULL,
    kind           text        NOT NULL,
    attempt        integer     NOT NULL,
    node_id        text,
    completed_at   timestamptz NOT NULL
) PARTITION BY RANGE (completed_at);

CREATE INDEX completions_key ON pgsched.completions (partition_id, ordering_id, scheduled_at, uniqueness_key);

-- Tasks that exhausted their attempts or failed permanently, kept until an
-- operator deletes or re-schedules them.
CREATE TABLE pgsched.dead_tasks (
    partition_id   integer     NOT NULL,
    id             bigint      NOT NULL,
    ordering_id    text COLLATE "C" NOT NULL,
    scheduled_at   timestamptz NOT NULL,
    uniqueness_key text COLLATE "C" NOT NULL,
    kind           text        NOT NULL,
    payload        jsonb       NOT NULL,
    attempt        integer     NOT NULL,
    last_error     text,
    node_id        text,
    died_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, id)
);

CREATE SEQUENCE pgsched.epoch_seq;

-- Worker nodes and their leases, always compared with the database clock.
CREATE TABLE pgsched.nodes (
    node_id          text        PRIMARY KEY,
    epoch            bigint      NOT NULL,
    lease_expires_at timestamptz NOT NULL,
    registered_at    timestamptz NOT NULL DEFAULT now(),
    renewed_at       timestamptz NOT NULL DEFAULT now(),
    host             text        NOT NULL DEFAULT '',
    pid              integer     NOT NULL DEFAULT 0
);

-- ensure_completion_partitions creates the daily completion partitions from
-- the day of at up to days_ahead days later and drops those wholly older than
-- the retention window. Safe to call concurrently and repeatedly.
-- +goose StatementBegin
CREATE FUNCTION pgsched.ensure_completion_partitions(at timestamptz, days_ahead integer)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    retention interval := (SELECT completion_retention FROM pgsched.settings);
    day date;
    name text;
    dropped integer := 0;
    r record;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('pgsched.completions'));
    FOR i IN 0 .. days_ahead LOOP
        day := (at AT TIME ZONE 'UTC')::date + i;
        name := 'completions_' || to_char(day, 'YYYYMMDD');
        IF to_regclass('pgsched.' || name) IS NULL THEN
            EXECUTE format('CREATE TABLE pgsched.%I PARTITION OF pgsched.completions FOR VALUES FROM (%L) TO (%L)',
                name, (day::timestamp AT TIME ZONE 'UTC'), ((day + 1)::timestamp AT TIME ZONE 'UTC'));
        END IF;
    END LOOP;
    FOR r IN
        SELECT c.relname FROM pg_inherits i
        JOIN pg_class c ON c.oid = i.inhrelid
        JOIN pg_class p ON p.oid = i.inhparent
        JOIN pg_namespace n ON n.oid = p.relnamespace
        WHERE n.nspname = 'pgsched' AND p.relname = 'completions'
          AND c.relname ~ '^completions_[0-9]{8}$'
          AND ((to_date(substr(c.relname, 13), 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC') < at - retention
    LOOP
        EXECUTE format('DROP TABLE pgsched.%I', r.relname);
        dropped := dropped + 1;
    END LOOP;
    RETURN dropped;
END
$$;
-- +goose StatementEnd

SELECT pgsched.ensure_completion_partitions(now() - interval '1 day', 8);

-- refresh_queue recomputes an ordering queue's head after its tasks changed,
-- deleting the queue when it has none. The caller holds the queue row lock.
-- A running queue keeps its state: its finisher refreshes it.
-- +goose StatementBegin
CREATE FUNCTION pgsched.refresh_queue(p_partition integer, p_ordering_id text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    h record;
BEGIN
    SELECT t.scheduled_at, t.uniqueness_key, t.run_at INTO h FROM pgsched.tasks t
    WHERE t.partition_id = p_partition AND t.ordering_id = p_ordering_id
    ORDER BY t.scheduled_at, t.id LIMIT 1;
    IF NOT FOUND THEN
        DELETE FROM pgsched.queues q WHERE q.partition_id = p_partition AND q.ordering_id = p_ordering_id;
    ELSE
        UPDATE pgsched.queues q SET head_scheduled_at = h.scheduled_at, head_uniqueness_key = h.uniqueness_key, next_at = h.run_at
        WHERE q.partition_id = p_partition AND q.ordering_id = p_ordering_id AND NOT q.running;
    END IF;
END
$$;
-- +goose StatementEnd

-- schedule_many enqueues a batch atomically and returns an array with one
-- result per input position: inserted, updated or already_completed. Any invalid
-- task, or a key that is running, rejects the whole batch with an error
-- naming the field (SQLSTATE PGS01 invalid, PGS02 in the past, PGS03
-- running). A key given twice in one batch: the last one wins, as if the
-- batch were enqueued in turn, and both positions report its result.
-- +goose StatementBegin
CREATE FUNCTION pgsched.schedule_many(
    ordering_ids    text[],
    scheduled_ats   timestamptz[],
    uniqueness_keys text[] DEFAULT NULL,
    payloads        jsonb[] DEFAULT NULL,
    kinds           text[] DEFAULT NULL
)
RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    s pgsched.settings;
    t_now timestamptz := now();
    n integer := coalesce(cardinality(ordering_ids), 0);
    parts integer[];
    results text[];
    bad record;
    bad_at integer;
    where_ text := '';
    lo timestamptz;
    hi timestamptz;
    done bigint[];
BEGIN
    SELECT * INTO STRICT s FROM pgsched.settings;
    IF coalesce(cardinality(scheduled_ats), 0) <> n
       OR (uniqueness_keys IS NOT NULL AND cardinality(uniqueness_keys) <> n)
       OR (payloads IS NOT NULL AND cardinality(payloads) <> n)
       OR (kinds IS NOT NULL AND cardinality(kinds) <> n) THEN
        RAISE EXCEPTION 'pgsched: schedule_many arrays must all have % elements', n USING ERRCODE = 'PGS01';
    END IF;
    IF n = 0 THEN
        RETURN '{}';
    END IF;

    -- Arrays are only ever unnested together: subscripting a large array of
    -- variable-width values costs O(i) per access.
    SELECT x.i, x.msg, CASE WHEN x.past THEN 'PGS02' ELSE 'PGS01' END AS code INTO bad FROM (
        SELECT u.i,
            u.sa < t_now - s.grace AS past,
            CASE
                WHEN u.o IS NULL OR u.o = '' THEN 'ordering_id is required'
                WHEN octet_length(u.o) > 255 THEN format('ordering_id is %s bytes, over the limit of 255', octet_length(u.o))
                WHEN u.sa IS NULL THEN 'scheduled_at is required'
                WHEN u.sa IN ('infinity', '-infinity') THEN 'scheduled_at must be a finite time'
                WHEN octet_length(u.uk) > 255 THEN format('uniqueness_key is %s bytes, over the limit of 255', octet_length(u.uk))
                WHEN u.k = '' THEN 'kind must not be empty'
                WHEN octet_length(u.k) > 255 THEN format('kind is %s bytes, over the limit of 255', octet_length(u.k))
                WHEN octet_length(u.pl::text) > s.max_payload_bytes THEN format('payload is %s bytes, over the limit of %s bytes', octet_length(u.pl::text), s.max_payload_bytes)
                WHEN u.sa < t_now - s.grace THEN format('scheduled_at %s is before now minus the grace window of %s', u.sa, s.grace)
            END AS msg
        FROM unnest(ordering_ids, scheduled_ats, uniqueness_keys, payloads, kinds) WITH ORDINALITY AS u(o, sa, uk, pl, k, i)
    ) x WHERE x.msg IS NOT NULL ORDER BY x.i LIMIT 1;
    IF FOUND THEN
        IF n > 1 THEN
            where_ := format(' (batch item %s)', bad.i);
        END IF;
        RAISE EXCEPTION USING MESSAGE = 'pgsched: ' || bad.msg || where_, ERRCODE = bad.code;
    END IF;

    SELECT array_agg(pgsched.partition_of(u.o, s.partition_count) ORDER BY u.i) INTO parts
    FROM unnest(ordering_ids) WITH ORDINALITY AS u(o, i);

    -- Lock (creating where new) the queue of every ordering_id, in key order
    -- so concurrent batches and finishers cannot deadlock. The head can only
    -- move earlier here: a queue's head becomes this batch's earliest task of
    -- it (by scheduled_at, then uniqueness_key: the order in which the insert
    -- below hands out ids) when that is strictly earlier. A key that turns
    -- out completed is corrected below. A queue whose head does not move is
    -- locked but not rewritten.
    INSERT INTO pgsched.queues AS q (partition_id, ordering_id, head_scheduled_at, head_uniqueness_key, next_at)
    SELECT DISTINCT ON (u.p, u.o) u.p, u.o, u.sa, coalesce(u.uk, ''), u.sa
    FROM unnest(parts, ordering_ids, scheduled_ats, uniqueness_keys) AS u(p, o, sa, uk)
    ORDER BY u.p, u.o, u.sa, coalesce(u.uk, '')
    ON CONFLICT (partition_id, ordering_id) DO UPDATE
    SET head_scheduled_at = excluded.head_scheduled_at, head_uniqueness_key = excluded.head_uniqueness_key,
        next_at = excluded.next_at
    WHERE excluded.head_scheduled_at < q.head_scheduled_at;

    -- With the queue locks held, the next statement's fresh snapshot sees
    -- every completion of these ordering_ids: a completed key never runs
    -- again. A key completes after its scheduled_at and, as its finisher held
    -- the queue lock we now hold, before now: the bounds [lo, hi] prune the
    -- daily completion partitions to those that can hold a tombstone of this
    -- batch (none when it is all in the future).
    lo := (SELECT min(u.sa) FROM unnest(scheduled_ats) AS u(sa));
    hi := clock_timestamp() + interval '1 minute';
    IF lo <= hi THEN
        SELECT array_agg(u.i) INTO done FROM unnest(parts, ordering_ids, scheduled_ats, uniqueness_keys) WITH ORDINALITY AS u(p, o, sa, uk, i)
        CROSS JOIN LATERAL (
            SELECT 1 FROM pgsched.completions c
            WHERE c.partition_id = u.p AND c.ordering_id = u.o AND c.scheduled_at = u.sa
              AND c.uniqueness_key = coalesce(u.uk, '') AND c.completed_at >= lo AND c.completed_at <= hi
            LIMIT 1) c;
    END IF;

    WITH u AS (
        SELECT x.i, x.p, x.o, x.sa, coalesce(x.uk, '') AS uk, coalesce(x.pl, '{}'::jsonb) AS pl, coalesce(x.k, 'default') AS k,
               x.i IN (SELECT unnest(done)) AS completed
        FROM unnest(parts, ordering_ids, scheduled_ats, uniqueness_keys, payloads, kinds) WITH ORDINALITY AS x(p, o, sa, uk, pl, k, i)
    ), cand AS (
        SELECT DISTINCT ON (u.p, u.o, u.sa, u.uk) u.*
        FROM u WHERE NOT u.completed
        ORDER BY u.p, u.o, u.sa, u.uk, u.i DESC
    ), up AS (
        INSERT INTO pgsched.tasks AS t (partition_id, ordering_id, scheduled_at, uniqueness_key, kind, payload, run_at)
        SELECT cand.p, cand.o, cand.sa, cand.uk, cand.k, cand.pl, cand.sa FROM cand
        ORDER BY cand.p, cand.o, cand.sa, cand.uk
        ON CONFLICT (partition_id, ordering_id, scheduled_at, uniqueness_key) DO UPDATE
        SET kind = excluded.kind, payload = excluded.payload, revision = t.revision + 1
        WHERE t.state = 'pending'
        RETURNING t.partition_id, t.ordering_id, t.scheduled_at, t.uniqueness_key, (t.revision = 0) AS inserted
    )
    SELECT array_agg(
        CASE WHEN u.completed THEN 'already_completed'
             WHEN up.inserted THEN 'inserted'
             WHEN up.inserted IS NOT NULL THEN 'updated'
        END ORDER BY u.i) INTO results
    FROM u LEFT JOIN up ON up.partition_id = u.p AND up.ordering_id = u.o
        AND up.scheduled_at = u.sa AND up.uniqueness_key = u.uk;

    bad_at := array_position(results, NULL);
    IF bad_at IS NOT NULL THEN
        IF n > 1 THEN
            where_ := format(' (batch item %s)', bad_at);
        END IF;
        RAISE EXCEPTION 'pgsched: task (%, %, %) is running and cannot be changed%',
            ordering_ids[bad_at], scheduled_ats[bad_at], coalesce(uniqueness_keys[bad_at], ''), where_
            USING ERRCODE = 'PGS03';
    END IF;

    -- Rare: queues locked for keys that were all completed need their head
    -- recomputed (or the queue removed).
    IF 'already_completed' = ANY (results) THEN
        PERFORM pgsched.refresh_queue(x.p, x.o)
        FROM (SELECT DISTINCT u.p, u.o FROM unnest(parts, ordering_ids, results) AS u(p, o, r)
              WHERE u.r = 'already_completed') x;
    END IF;

    IF EXISTS (SELECT 1 FROM unnest(scheduled_ats, results) AS u(sa, r)
               WHERE u.r <> 'already_completed' AND u.sa <= t_now + s.notify_horizon) THEN
        PERFORM pg_notify('pgsched.due', '');
    END IF;

    RETURN results;
END
$$;
-- +goose StatementEnd

-- schedule enqueues one task; see schedule_many.
-- +goose StatementBegin
CREATE FUNCTION pgsched.schedule(
    ordering_id    text,
    scheduled_at   timestamptz,
    uniqueness_key text DEFAULT '',
    payload        jsonb DEFAULT '{}',
    kind           text DEFAULT 'default'
)
RETURNS text
LANGUAGE sql AS $$
    SELECT (pgsched.schedule_many(
        ARRAY[ordering_id], ARRAY[scheduled_at], ARRAY[uniqueness_key], ARRAY[payload], ARRAY[kind]))[1]
$$;
-- +goose StatementEnd

-- cancel removes a pending task. PGS03 if it is running, PGS04 if there is no
-- such pending task.
-- +goose StatementBegin
CREATE FUNCTION pgsched.cancel(ordering_id text, scheduled_at timestamptz, uniqueness_key text DEFAULT '')
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    p integer := pgsched.partition_of(ordering_id, (SELECT partition_count FROM pgsched.settings));
    st text;
BEGIN
    PERFORM 1 FROM pgsched.queues q WHERE q.partition_id = p AND q.ordering_id = cancel.ordering_id FOR UPDATE;
    DELETE FROM pgsched.tasks t
    WHERE t.partition_id = p AND t.ordering_id = cancel.ordering_id
      AND t.scheduled_at = cancel.scheduled_at AND t.uniqueness_key = coalesce(cancel.uniqueness_key, '')
      AND t.state = 'pending';
    IF NOT FOUND THEN
        SELECT t.state INTO st FROM pgsched.tasks t
        WHERE t.partition_id = p AND t.ordering_id = cancel.ordering_id
          AND t.scheduled_at = cancel.scheduled_at AND t.uniqueness_key = coalesce(cancel.uniqueness_key, '');
        IF st = 'running' THEN
            RAISE EXCEPTION 'pgsched: task (%, %, %) is running and cannot be cancelled',
                ordering_id, scheduled_at, uniqueness_key USING ERRCODE = 'PGS03';
        END IF;
        RAISE EXCEPTION 'pgsched: no pending task (%, %, %)', ordering_id, scheduled_at, uniqueness_key
            USING ERRCODE = 'PGS04';
    END IF;
    PERFORM pgsched.refresh_queue(p, ordering_id);
END
$$;
-- +goose StatementEnd

-- reschedule moves a pending task to a new time in one step; a claimer sees
-- it either at its old time or at its new one. PGS02 if the new time is in
-- the past, PGS03 running, PGS04 not found, PGS05 if the new key exists or
-- was completed.
-- +goose StatementBegin
CREATE FUNCTION pgsched.reschedule(ordering_id text, scheduled_at timestamptz, uniqueness_key text, new_scheduled_at timestamptz)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    s pgsched.settings;
    p integer;
    uk text := coalesce(uniqueness_key, '');
    st text;
BEGIN
    SELECT * INTO STRICT s FROM pgsched.settings;
    IF new_scheduled_at IS NULL OR new_scheduled_at IN ('infinity', '-infinity') THEN
        RAISE EXCEPTION 'pgsched: new_scheduled_at is required and must be finite' USING ERRCODE = 'PGS01';
    END IF;
    IF new_scheduled_at < now() - s.grace THEN
        RAISE EXCEPTION 'pgsched: new_scheduled_at % is before now minus the grace window of %', new_scheduled_at, s.grace
            USING ERRCODE = 'PGS02';
    END IF;
    p := pgsched.partition_of(ordering_id, s.partition_count);
    PERFORM 1 FROM pgsched.queues q WHERE q.partition_id = p AND q.ordering_id = reschedule.ordering_id FOR UPDATE;
    IF new_scheduled_at <> scheduled_at AND (
        EXISTS (SELECT 1 FROM pgsched.tasks t WHERE t.partition_id = p AND t.ordering_id = reschedule.ordering_id
                AND t.scheduled_at = new_scheduled_at AND t.uniqueness_key = uk)
        OR EXISTS (SELECT 1 FROM pgsched.completions c WHERE c.partition_id = p AND c.ordering_id = reschedule.ordering_id
                AND c.scheduled_at = new_scheduled_at AND c.uniqueness_key = uk AND c.completed_at >= new_scheduled_at)) THEN
        RAISE EXCEPTION 'pgsched: a task (%, %, %) already exists or was completed', ordering_id, new_scheduled_at, uk
            USING ERRCODE = 'PGS05';
    END IF;
    UPDATE pgsched.tasks t SET scheduled_at = new_scheduled_at, run_at = new_scheduled_at
    WHERE t.partition_id = p AND t.ordering_id = reschedule.ordering_id
      AND t.scheduled_at = reschedule.scheduled_at AND t.uniqueness_key = uk AND t.state = 'pending';
    IF NOT FOUND THEN
        SELECT t.state INTO st FROM pgsched.tasks t
        WHERE t.partition_id = p AND t.ordering_id = reschedule.ordering_id
          AND t.scheduled_at = reschedule.scheduled_at AND t.uniqueness_key = uk;
        IF st = 'running' THEN
            RAISE EXCEPTION 'pgsched: task (%, %, %) is running and cannot be rescheduled', ordering_id, scheduled_at, uk
                USING ERRCODE = 'PGS03';
        END IF;
        RAISE EXCEPTION 'pgsched: no pending task (%, %, %)', ordering_id, scheduled_at, uk USING ERRCODE = 'PGS04';
    END IF;
    PERFORM pgsched.refresh_queue(p, ordering_id);
    IF new_scheduled_at <= now() + s.notify_horizon THEN
        PERFORM pg_notify('pgsched.due', '');
    END IF;
END
$$;
-- +goose StatementEnd


-- lock_queues locks the given ordering queues in key order (so lockers
-- cannot deadlock), one index probe each.
-- +goose StatementBegin
CREATE FUNCTION pgsched.lock_queues(partition_ids integer[], ordering_ids text[])
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM (
        SELECT DISTINCT a.p, a.o FROM unnest(partition_ids, ordering_ids) AS a(p, o) ORDER BY a.p, a.o
    ) a
    CROSS JOIN LATERAL (
        SELECT 1 FROM pgsched.queues q WHERE q.partition_id = a.p AND q.ordering_id = a.o LIMIT 1 FOR UPDATE
    ) l;
END
$$;
-- +goose StatementEnd

-- advance_queues moves the given ordering queues, whose running task just
-- finished or was given back, on to their next head (or removes them when
-- they have no task left), in one statement. The caller holds the queue row
-- locks. The head is found with two index probes (earliest scheduled_at,
-- then the first enqueued at that time), whatever the queue's length.
-- +goose StatementBegin
CREATE FUNCTION pgsched.advance_queues(partition_ids integer[], ordering_ids text[])
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    WITH h AS (
        SELECT a.p, a.o, hd.scheduled_at, hd.uniqueness_key, hd.run_at
        FROM unnest(partition_ids, ordering_ids) AS a(p, o)
        LEFT JOIN LATERAL (
            SELECT t.scheduled_at, t.uniqueness_key, t.run_at FROM pgsched.tasks t
            WHERE t.partition_id = a.p AND t.ordering_id = a.o
              AND t.scheduled_at = (SELECT t2.scheduled_at FROM pgsched.tasks t2
                                    WHERE t2.partition_id = a.p AND t2.ordering_id = a.o
                                    ORDER BY t2.scheduled_at LIMIT 1)
            ORDER BY t.id LIMIT 1
        ) hd ON true
    ), moved AS (
        UPDATE pgsched.queues q
        SET running = false, head_scheduled_at = h.scheduled_at, head_uniqueness_key = h.uniqueness_key, next_at = h.run_at
        FROM h
        WHERE q.partition_id = h.p AND q.ordering_id = h.o AND h.scheduled_at IS NOT NULL
    )
    DELETE FROM pgsched.queues q
    USING h
    WHERE q.partition_id = h.p AND q.ordering_id = h.o AND h.scheduled_at IS NULL;
END
$$;
-- +goose StatementEnd

-- claim_due_many claims the head task of up to p_max due ordering queues
-- from the given partitions, in the order given (callers pass the most
-- overdue first), for the node (p_node_id, p_epoch) while its lease is
-- live, and returns the claimed tasks: one transaction, so one commit (one
-- WAL flush) however many partitions it spans. Each statement locks rows of
-- one partition only. With p_ahead_seconds, heads due within that much of
-- now are claimed too: the worker holds them and starts each on time, so a
-- claim's round trip and commit are not part of a task's start lateness.
--
-- Queues are locked with SKIP LOCKED in a CTE (never IN (subquery ... FOR
-- UPDATE), which can update more rows than the limit). Each queue names its
-- head's key, found with one primary-key probe (a LATERAL ... LIMIT 1
-- cannot be flattened into a join); both updates then address their rows
-- by ctid, so no plan scans a partition per claimed task, even on tables
-- never analyzed. The task update re-checks state and run_at, so a task
-- changed since the statement's snapshot is left alone. Seq scans are
-- disabled because the planner, costing a ctid fetch as a random page read,
-- prefers scanning a small partition whole to fetching 100 tuples.
-- +goose StatementBegin
CREATE FUNCTION pgsched.claim_due_many(p_node_id text, p_epoch bigint, p_partitions integer[], p_max integer,
                                       p_ahead_seconds float8 DEFAULT 0)
RETURNS SETOF pgsched.tasks
LANGUAGE plpgsql
SET enable_seqscan = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    p       integer;
    left_   integer := p_max;
    got     integer;
    horizon timestamptz := now() + make_interval(secs => greatest(p_ahead_seconds, 0));
BEGIN
    FOREACH p IN ARRAY coalesce(p_partitions, '{}') LOOP
        EXIT WHEN left_ <= 0;
        RETURN QUERY
        WITH q AS (
            SELECT qq.ctid AS qtid, qq.ordering_id, qq.head_scheduled_at, qq.head_uniqueness_key FROM pgsched.queues qq
            WHERE qq.partition_id = p AND NOT qq.running AND qq.next_at <= horizon
              AND EXISTS (SELECT 1 FROM pgsched.nodes n
                          WHERE n.node_id = p_node_id AND n.epoch = p_epoch AND n.lease_expires_at > now())
            ORDER BY qq.next_at
            LIMIT left_
            FOR UPDATE SKIP LOCKED
        ), claimed AS (
            UPDATE pgsched.tasks t
            SET state = 'running', node_id = p_node_id, epoch = p_epoch, attempt = t.attempt + 1, claimed_at = now()
            WHERE t.partition_id = p
              AND t.ctid = ANY (ARRAY(
                SELECT h.ctid FROM q CROSS JOIN LATERAL (
                    SELECT t2.ctid FROM pgsched.tasks t2
                    WHERE t2.partition_id = p AND t2.ordering_id = q.ordering_id
                      AND t2.scheduled_at = q.head_scheduled_at AND t2.uniqueness_key = q.head_uniqueness_key
                    LIMIT 1) h))
              AND t.state = 'pending' AND t.run_at <= horizon
            RETURNING t.*
        ), marked AS (
            UPDATE pgsched.queues qq SET running = true
            WHERE qq.partition_id = p
              AND qq.ctid = ANY (ARRAY(SELECT q.qtid FROM q JOIN claimed c ON c.ordering_id = q.ordering_id))
        )
        SELECT c.* FROM claimed c;
        GET DIAGNOSTICS got = ROW_COUNT;
        left_ := left_ - got;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- finish_tasks records what happened to running tasks, in one batch:
-- outcome 'completed' deletes the task and writes its tombstone, 'dead' moves
-- it to dead_tasks, 'retry' makes it pending again retry_delay seconds from
-- now (the database's now), 'release'
-- makes it pending again as it was (a graceful stop gave it back). Only tasks
-- still held by (node_id, epoch) change: a stale node's late writes change
-- nothing. Returns the ids of the tasks that changed.
-- +goose StatementBegin
CREATE FUNCTION pgsched.finish_tasks(
    p_node_id      text,
    p_epoch        bigint,
    partition_ids  integer[],
    ordering_ids   text[],
    task_ids       bigint[],
    outcomes       text[],
    retry_delays   float8[],
    errors         text[]
)
RETURNS bigint[]
LANGUAGE plpgsql
-- The batch spans partitions, and the planner does not cost run-time
-- partition pruning: left alone it prefers scanning every partition of the
-- queues (or rescanning every running task per batch item) to one index
-- probe per item. These settings, with LATERAL ... LIMIT 1 probes, keep
-- every plan at a few index probes per item.
SET enable_seqscan = off
SET enable_mergejoin = off
SET enable_material = off
SET enable_nestloop = on
AS $$
DECLARE
    applied_p integer[];
    applied_o text[];
    applied_id bigint[];
BEGIN
    -- Lock the queues first, in key order, so enqueuers and other finishers
    -- queue up behind us and the statements below see their commits.
    PERFORM pgsched.lock_queues(partition_ids, ordering_ids);

    -- The tasks changed here are running ones: hash the batch against the
    -- running tasks (a partial index), never rescan them per batch item.
    SET LOCAL enable_nestloop = off;
    WITH b AS (
        SELECT * FROM unnest(partition_ids, ordering_ids, task_ids, outcomes, retry_delays, errors)
            AS b(p, o, id, outcome, retry_delay, err)
    ), gone AS (
        DELETE FROM pgsched.tasks t USING b
        WHERE t.partition_id = b.p AND t.ordering_id = b.o AND t.state = 'running' AND t.id = b.id
          AND t.node_id = p_node_id AND t.epoch = p_epoch AND b.outcome IN ('completed', 'dead')
        RETURNING t.*, b.outcome, b.err
    ), tomb AS (
        INSERT INTO pgsched.completions (partition_id, ordering_id, scheduled_at, uniqueness_key, kind, attempt, node_id, completed_at)
        SELECT g.partition_id, g.ordering_id, g.scheduled_at, g.uniqueness_key, g.kind, g.attempt, g.node_id, now()
        FROM gone g WHERE g.outcome = 'completed'
    ), dead AS (
        INSERT INTO pgsched.dead_tasks (partition_id, id, ordering_id, scheduled_at, uniqueness_key, kind, payload, attempt, last_error, node_id)
        SELECT g.partition_id, g.id, g.ordering_id, g.scheduled_at, g.uniqueness_key, g.kind, g.payload, g.attempt, g.err, g.node_id
        FROM gone g WHERE g.outcome = 'dead'
    ), back AS (
        UPDATE pgsched.tasks t
        SET state = 'pending', node_id = NULL, epoch = NULL, claimed_at = NULL,
            run_at = CASE WHEN b.outcome = 'retry' THEN now() + make_interval(secs => coalesce(b.retry_delay, 0)) ELSE t.run_at END,
            attempt = CASE WHEN b.outcome = 'release' THEN greatest(t.attempt - 1, 0) ELSE t.attempt END,
            last_error = CASE WHEN b.outcome = 'retry' THEN b.err ELSE t.last_error END
        FROM b
        WHERE t.partition_id = b.p AND t.ordering_id = b.o AND t.state = 'running' AND t.id = b.id
          AND t.node_id = p_node_id AND t.epoch = p_epoch AND b.outcome IN ('retry', 'release')
        RETURNING t.partition_id, t.ordering_id, t.id
    ), applied AS (
        SELECT g.partition_id, g.ordering_id, g.id FROM gone g
        UNION ALL
        SELECT k.partition_id, k.ordering_id, k.id FROM back k
    )
    SELECT array_agg(a.partition_id), array_agg(a.ordering_id), array_agg(a.id)
    INTO applied_p, applied_o, applied_id FROM applied a;
    SET LOCAL enable_nestloop = on;

    IF applied_id IS NULL THEN
        RETURN '{}';
    END IF;

    PERFORM pgsched.advance_queues(applied_p, applied_o);

    RETURN applied_id;
END
$$;
-- +goose StatementEnd

-- rescue_expired gives the running tasks of nodes whose lease has expired
-- (or whose row is gone) back to their queues, to run again at once. With
-- p_nodes given, only those nodes' tasks are rescued. Returns the count.
-- +goose StatementBegin
CREATE FUNCTION pgsched.rescue_expired(p_nodes text[] DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
SET enable_seqscan = off
SET enable_mergejoin = off
SET enable_material = off
SET enable_nestloop = on
AS $$
DECLARE
    lost_p integer[];
    lost_o text[];
    lost_id bigint[];
    n integer;
BEGIN
    SELECT array_agg(t.partition_id ORDER BY t.partition_id, t.ordering_id),
           array_agg(t.ordering_id ORDER BY t.partition_id, t.ordering_id),
           array_agg(t.id ORDER BY t.partition_id, t.ordering_id)
    INTO lost_p, lost_o, lost_id
    FROM pgsched.tasks t
    LEFT JOIN pgsched.nodes nd ON nd.node_id = t.node_id AND nd.epoch = t.epoch
    WHERE t.state = 'running'
      AND (p_nodes IS NULL OR t.node_id = ANY (p_nodes))
      AND (nd.node_id IS NULL OR nd.lease_expires_at < now());
    IF lost_id IS NULL THEN
        RETURN 0;
    END IF;

    PERFORM pgsched.lock_queues(lost_p, lost_o);

    SET LOCAL enable_nestloop = off;
    WITH back AS (
        UPDATE pgsched.tasks t
        SET state = 'pending', last_error = format('node %s (epoch %s) lost its lease while running this task', t.node_id, t.epoch),
            node_id = NULL, epoch = NULL, claimed_at = NULL
        FROM unnest(lost_p, lost_o, lost_id) AS b(p, o, id)
        WHERE t.partition_id = b.p AND t.ordering_id = b.o AND t.id = b.id AND t.state = 'running'
          AND NOT EXISTS (SELECT 1 FROM pgsched.nodes x WHERE x.node_id = t.node_id AND x.epoch = t.epoch AND x.lease_expires_at >= now())
        RETURNING t.partition_id, t.ordering_id
    )
    SELECT array_agg(back.partition_id), array_agg(back.ordering_id) INTO lost_p, lost_o FROM back;
    SET LOCAL enable_nestloop = on;
    n := coalesce(cardinality(lost_p), 0);
    IF n = 0 THEN
        RETURN 0;
    END IF;

    PERFORM pgsched.advance_queues(lost_p, lost_o);
    PERFORM pg_notify('pgsched.due', '');
    RETURN n;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- The schema itself stays: goose keeps its version table there.
DROP FUNCTION pgsched.rescue_expired, pgsched.finish_tasks, pgsched.claim_due_many, pgsched.advance_queues, pgsched.lock_queues, pgsched.reschedule, pgsched.cancel,
    pgsched.schedule, pgsched.schedule_many, pgsched.refresh_queue, pgsched.ensure_completion_partitions,
    pgsched.partition_of;
DROP TABLE pgsched.nodes, pgsched.dead_tasks, pgsched.completions, pgsched.queues, pgsched.tasks, pgsched.settings;
DROP SEQUENCE pgsched.epoch_seq, pgsched.task_id_seq;
