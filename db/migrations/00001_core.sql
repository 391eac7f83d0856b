-- Core storage of pgsched: pending tasks, ordering queues, completion
-- tombstones, dead tasks and node leases, plus the SQL API that Go and psql
-- users share (schedule, schedule_many, cancel, reschedule).
--
-- Every object lives in the schema named "pgsched" here; the migrator
-- rewrites that name when a different schema is chosen at migrate time, and
-- reads the partition count from the setting pgsched.partition_count.
--
-- The functions that claim, finish, promote and settle tasks turn JIT off:
-- their plans are index probes in nested loops, and the settings that keep
-- them so (enable_seqscan = off and friends) inflate plan costs past
-- jit_above_cost, so a large batch would pay a JIT compile on every call,
-- costing more than the statement itself.

-- +goose Up
CREATE SCHEMA IF NOT EXISTS pgsched;

CREATE TABLE pgsched.settings (
    singleton            boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    partition_count      integer  NOT NULL CHECK (partition_count BETWEEN 1 AND 4096),
    -- Physical partitions of tasks and queues; logical partition p lives in
    -- table partition p % table_partitions (see the note above the
    -- partitions' creation below).
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
    t integer := coalesce(nullif(current_setting('pgsched.table_partitions', true), ''), '2')::integer;
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

-- Task ids order tasks with the same scheduled_at by enqueue: no CACHE, or
-- each connection would hand out ids from a block of its own.
CREATE SEQUENCE pgsched.task_id_seq;

-- Tasks live in two tables, both partitioned by logical partition (a
-- function of ordering_id, so a task never moves with its state):
--
--   heads    the task each ordering_id runs next: one row per ordering_id
--            that has tasks, running or not. Its primary key is the
--            per-ordering_id serialisation point (enqueue, cancel,
--            reschedule and finish lock it, in key order) and the
--            database's own backstop against two tasks of one ordering_id
--            running at once: only a head runs.
--   backlog  the tasks queued behind their ordering_id's head.
--
-- A head is the earliest task of its ordering_id by (scheduled_at, id),
-- id being handed out in enqueue order, except that a running head stays
-- until it finishes. Splitting them means a task of its own ordering_id is
-- written once at enqueue, updated once at claim and deleted once at
-- finish, and a claim reads heads only, so a stuck ordering_id's backlog
-- is never scanned. The view pgsched.tasks shows both as one list.
--
-- Keys are compared bytewise (COLLATE "C"): they are identifiers, and
-- indexes on them must not depend on the operating system's locale, whose
-- rules can change under an index with a C library upgrade.
CREATE TABLE pgsched.heads (
    partition_id   integer     NOT NULL,
    ordering_id    text COLLATE "C" NOT NULL,
    scheduled_at   timestamptz NOT NULL,
    uniqueness_key text COLLATE "C" NOT NULL DEFAULT '',
    id             bigint      NOT NULL DEFAULT nextval('pgsched.task_id_seq'),
    kind           text        NOT NULL DEFAULT 'default',
    payload        jsonb       NOT NULL DEFAULT '{}',
    run_at         timestamptz NOT NULL,
    attempt        integer     NOT NULL DEFAULT 0,
    revision       integer     NOT NULL DEFAULT 0, -- times overwritten by schedule
    last_error     text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    -- false only when the ordering_id has no backlog task (then finishing
    -- it needs no look for a next head); kept by settle_heads.
    backlog        boolean     NOT NULL DEFAULT false,
    running        boolean     NOT NULL DEFAULT false,
    node_id        text,
    epoch          bigint,
    claimed_at     timestamptz,
    -- How many tasks of this ordering_id ran back to back before this one
    -- on its node, each handing over to the next as it finished (0 for a
    -- task that was claimed, and for every task not running);
    -- finish_tasks stops handing over at a limit.
    chain          integer     NOT NULL DEFAULT 0,
    -- The tasks known to come next (see "Known successors" below): the
    -- ctids and ids of the first backlog rows of this ordering_id in run
    -- order, and whether more follow them. NULL: not known.
    next_tids      tid[],
    next_ids       bigint[],
    next_more      boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (partition_id, ordering_id),
    CHECK (octet_length(ordering_id) BETWEEN 1 AND 255),
    CHECK (octet_length(uniqueness_key) <= 255),
    CHECK (octet_length(kind) BETWEEN 1 AND 255),
    CHECK (running = (node_id IS NOT NULL)),
    CHECK (running OR chain = 0)
) PARTITION BY LIST (partition_id);

-- The claim index: heads by when they may run. No index covers the columns
-- a claim changes (running, node_id, epoch, attempt, claimed_at), and the
-- table partitions leave a quarter of each page free, so a claim is a HOT
-- update: a new row version on the same page and no index writes. The
-- price: a claim's scan steps over the heads running in its partition
-- (at most the node's concurrency plus prefetch, spread over its
-- partitions), and finding a dead node's running tasks reads the table
-- (rare: when a node dies, or the leader's sweep once a minute).
-- Leaving claimed heads out too (WHERE NOT running) spares the claims
-- those steps but makes every claim, release and rescue write a
-- primary-key entry; it did not pay off in the full benchmark
-- (docs/design.md, "Measured and not taken").
--
-- Heads a finish handed over (chain > 0, running) are left out: neither a
-- claim nor a look for due work wants them, and in an ordered burn-down
-- nearly every task is one, so their index entry was written and deleted
-- again with no reader (and its dead entries slowed the claims' scans).
-- Pending heads have chain 0 (CHECK) and a claim takes only those and
-- leaves chain alone, so the claim stays HOT (a column an index predicate
-- reads blocks HOT only when its value changes). Every query that wants
-- the index says chain = 0.
CREATE INDEX heads_due ON pgsched.heads (partition_id, run_at) WHERE chain = 0;

-- Known successors. Finding an ordering_id's next task is an index scan of
-- the backlog, and a btree scan reads every entry of the key on the leaf
-- page it starts on, not only the two it returns: with a hundred tasks
-- queued per ordering_id that was a third of an ordered finish. So the
-- scan that promotes a task also notes the next few (next_tids, next_ids,
-- next_more) in the new head, and the finishes that follow take the
-- successor by ctid, in the statement that deletes its predecessor.
--
-- The rule that keeps this right: whoever changes an ordering_id's backlog
-- other than by such a promotion (schedule_many, cancel, reschedule,
-- settle_heads) first writes NULL into its head's next_tids, in the same
-- transaction, with a row update rather than a lock. A finisher deletes
-- the head in the statement that reads next_tids, so it either sees the
-- NULL (the writer committed first, or committed while the finisher
-- waited for the row: PostgreSQL then re-reads the newest row version) or
-- the writer waits for the finisher. Ties in scheduled_at, whose order is
-- the task id rather than the index's uniqueness_key, are never noted;
-- the id is checked with the ctid, so a table rewrite (VACUUM FULL) that
-- moves rows only costs the scan.

-- The same task columns as heads, in the same order, so a task moves
-- between the two with its history (attempt, last_error, run_at).
CREATE TABLE pgsched.backlog (
    partition_id   integer     NOT NULL,
    ordering_id    text COLLATE "C" NOT NULL,
    scheduled_at   timestamptz NOT NULL,
    uniqueness_key text COLLATE "C" NOT NULL DEFAULT '',
    id             bigint      NOT NULL DEFAULT nextval('pgsched.task_id_seq'),
    kind           text        NOT NULL DEFAULT 'default',
    payload        jsonb       NOT NULL DEFAULT '{}',
    run_at         timestamptz NOT NULL,
    attempt        integer     NOT NULL DEFAULT 0,
    revision       integer     NOT NULL DEFAULT 0,
    last_error     text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, ordering_id, scheduled_at, uniqueness_key),
    CHECK (octet_length(ordering_id) BETWEEN 1 AND 255),
    CHECK (octet_length(uniqueness_key) <= 255),
    CHECK (octet_length(kind) BETWEEN 1 AND 255)
) PARTITION BY LIST (partition_id);

-- The tables are partitioned by logical partition, but each table
-- partition holds every table_partitions-th logical partition (default 2).
-- Every statement pays a fixed cost per table partition (locks, executor
-- set-up of cached generic plans, batches spanning partitions): with one
-- table partition per logical partition that cost dominates claims and
-- outcome batches, and fewer table partitions keep it small (ordered
-- work, which claims a few heads from many partitions, gains most; the
-- figures are in docs/design.md). Ownership,
-- claiming and Citus distribution stay per logical partition; every
-- statement still filters on partition_id. More table partitions
-- (-table-partitions) split vacuum work for very large tables.
-- +goose StatementBegin
DO $$
DECLARE
    n integer := (SELECT partition_count FROM pgsched.settings);
    t integer := (SELECT table_partitions FROM pgsched.settings);
    vals text;
BEGIN
    FOR i IN 0 .. t - 1 LOOP
        SELECT string_agg(p::text, ', ' ORDER BY p) INTO vals FROM generate_series(i, n - 1, t) AS p;
        EXECUTE format('CREATE TABLE pgsched.heads_p%s PARTITION OF pgsched.heads FOR VALUES IN (%s) WITH (fillfactor = 75)', i, vals);
        EXECUTE format('CREATE TABLE pgsched.backlog_p%s PARTITION OF pgsched.backlog FOR VALUES IN (%s)', i, vals);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- tasks: every pending and running task, heads and backlog together, for
-- people with psql. head says whether it is its ordering_id's next.
CREATE VIEW pgsched.tasks AS
SELECT h.partition_id, h.ordering_id, h.scheduled_at, h.uniqueness_key, h.id, h.kind, h.payload,
       CASE WHEN h.running THEN 'running' ELSE 'pending' END AS state,
       h.run_at, h.attempt, h.revision, h.last_error, h.node_id, h.epoch, h.claimed_at, h.created_at,
       true AS head
FROM pgsched.heads h
UNION ALL
SELECT b.partition_id, b.ordering_id, b.scheduled_at, b.uniqueness_key, b.id, b.kind, b.payload,
       'pending', b.run_at, b.attempt, b.revision, b.last_error, NULL, NULL, NULL, b.created_at,
       false
FROM pgsched.backlog b;


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


-- lock_heads locks the heads of the given ordering_ids in key order (every
-- locker of several heads goes in this order, so they cannot deadlock), one
-- index probe each.
-- +goose StatementBegin
CREATE FUNCTION pgsched.lock_heads(partition_ids integer[], ordering_ids text[])
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM (
        SELECT DISTINCT a.p, a.o COLLATE "C" AS o FROM unnest(partition_ids, ordering_ids) AS a(p, o)
        ORDER BY a.p, o
    ) a
    CROSS JOIN LATERAL (
        SELECT 1 FROM pgsched.heads h WHERE h.partition_id = a.p AND h.ordering_id = a.o LIMIT 1 FOR UPDATE
    ) l;
END
$$;
-- +goose StatementEnd

-- lock_head locks one ordering_id's head for a writer about to change its
-- backlog, forgetting the head's known successors (see "Known
-- successors"), and returns the head's key and whether it runs; no row when
-- the ordering_id has no task. A finish that deleted the head while this
-- waited for its lock leaves the UPDATE nothing, though it made the next
-- task the head: the lock is then tried again in a new statement, whose
-- snapshot sees that one.
-- +goose StatementBegin
CREATE FUNCTION pgsched.lock_head(p integer, o text)
RETURNS TABLE (scheduled_at timestamptz, uniqueness_key text, running boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    FOR i IN 1 .. 100 LOOP
        RETURN QUERY
        UPDATE pgsched.heads h SET next_tids = NULL, next_ids = NULL
        WHERE h.partition_id = p AND h.ordering_id = o
        RETURNING h.scheduled_at, h.uniqueness_key::text, h.running;
        EXIT WHEN FOUND OR NOT EXISTS (SELECT 1 FROM pgsched.heads h WHERE h.partition_id = p AND h.ordering_id = o);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- settle_heads makes each given ordering_id's head its earliest task again
-- after its tasks changed: the earliest backlog task (by scheduled_at, then
-- id) becomes the head when there is none, or when it comes before an idle
-- head, which then goes back to the backlog. A running head stays. It also
-- sets each head's backlog flag. One statement for the whole set; the
-- caller holds the heads' locks (or has deleted them in this transaction).
-- +goose StatementBegin
CREATE FUNCTION pgsched.settle_heads(partition_ids integer[], ordering_ids text[])
RETURNS void
LANGUAGE plpgsql
SET jit = off
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_material = off
AS $$
BEGIN
    WITH k AS (
        SELECT DISTINCT a.p, a.o FROM unnest(partition_ids, ordering_ids) AS a(p, o)
    ), st AS (
        -- The earliest backlog task (two index probes whatever the length)
        -- and the head, if any; swap: the backlog task becomes the head.
        SELECT k.p, k.o, b.scheduled_at, b.uniqueness_key, b.id, b.kind, b.payload, b.run_at, b.attempt,
               b.revision, b.last_error, b.created_at,
               b.id IS NOT NULL AS has_next, h.ordering_id IS NOT NULL AS has_head, h.backlog AS flag,
               b.id IS NOT NULL AND (h.ordering_id IS NULL
                   OR (NOT h.running AND (b.scheduled_at, b.id) < (h.scheduled_at, h.id))) AS swap
        FROM k
        LEFT JOIN LATERAL (
            SELECT b.* FROM pgsched.backlog b
            WHERE b.partition_id = k.p AND b.ordering_id = k.o
              AND b.scheduled_at = (SELECT b2.scheduled_at FROM pgsched.backlog b2
                                    WHERE b2.partition_id = k.p AND b2.ordering_id = k.o
                                    ORDER BY b2.scheduled_at LIMIT 1)
            ORDER BY b.id LIMIT 1
        ) b ON true
        LEFT JOIN pgsched.heads h ON h.partition_id = k.p AND h.ordering_id = k.o
    ), popped AS (
        DELETE FROM pgsched.backlog b USING st
        WHERE st.swap AND b.partition_id = st.p AND b.ordering_id = st.o
          AND b.scheduled_at = st.scheduled_at AND b.uniqueness_key = st.uniqueness_key
    ), demoted AS (
        INSERT INTO pgsched.backlog (partition_id, ordering_id, scheduled_at, uniqueness_key, id, kind, payload,
                                     run_at, attempt, revision, last_error, created_at)
        SELECT h.partition_id, h.ordering_id, h.scheduled_at, h.uniqueness_key, h.id, h.kind, h.payload,
               h.run_at, h.attempt, h.revision, h.last_error, h.created_at
        FROM st JOIN pgsched.heads h ON h.partition_id = st.p AND h.ordering_id = st.o
        WHERE st.swap AND st.has_head
    ), flagged AS (
        UPDATE pgsched.heads h SET backlog = st.has_next, next_tids = NULL, next_ids = NULL
        FROM st
        WHERE NOT st.swap AND st.has_head AND st.flag <> st.has_next
          AND h.partition_id = st.p AND h.ordering_id = st.o
    )
    INSERT INTO pgsched.heads AS h (partition_id, ordering_id, scheduled_at, uniqueness_key, id, kind, payload,
                                    run_at, attempt, revision, last_error, created_at, backlog)
    SELECT st.p, st.o, st.scheduled_at, st.uniqueness_key, st.id, st.kind, st.payload,
           st.run_at, st.attempt, st.revision, st.last_error, st.created_at,
           st.has_head OR EXISTS (SELECT 1 FROM pgsched.backlog b
                                  WHERE b.partition_id = st.p AND b.ordering_id = st.o
                                    AND (b.scheduled_at, b.uniqueness_key) <> (st.scheduled_at, st.uniqueness_key))
    FROM st WHERE st.swap
    ON CONFLICT (partition_id, ordering_id) DO UPDATE
    SET scheduled_at = excluded.scheduled_at, uniqueness_key = excluded.uniqueness_key, id = excluded.id,
        kind = excluded.kind, payload = excluded.payload, run_at = excluded.run_at, attempt = excluded.attempt,
        revision = excluded.revision, last_error = excluded.last_error, created_at = excluded.created_at,
        backlog = excluded.backlog, next_tids = NULL, next_ids = NULL;
END
$$;
-- +goose StatementEnd

-- schedule_many enqueues a batch atomically and returns an array with one
-- result per input position: inserted, updated or already_completed. Any invalid
-- task, or a key that is running, rejects the whole batch with an error
-- naming the field (SQLSTATE PGS01 invalid, PGS02 in the past, PGS03
-- running). A key given twice in one batch: the last one wins, as if the
-- batch were enqueued in turn, and both positions report its result. A NULL
-- or empty kind is 'default', a NULL payload {}.
--
-- new_keys is for a caller that expects none of the batch's ordering_ids to
-- have a task yet (the usual bulk enqueue): their heads are then written
-- with a plain INSERT, a third cheaper than the INSERT ... ON CONFLICT that
-- must otherwise find and lock existing heads, and if one exists after all
-- the call fails with SQLSTATE 23505 (unique_violation) having written
-- nothing, so the caller can send the batch again without new_keys. The Go
-- client does that for large batches outside a caller's transaction.
-- +goose StatementBegin
CREATE FUNCTION pgsched.schedule_many(
    ordering_ids    text[],
    scheduled_ats   timestamptz[],
    uniqueness_keys text[] DEFAULT NULL,
    payloads        jsonb[] DEFAULT NULL,
    kinds           text[] DEFAULT NULL,
    new_keys        boolean DEFAULT false
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
    fresh integer[];
    fresh_ids bigint[];
    fresh_all boolean;
    done integer[];
    settle_p integer[];
    settle_o text[];
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
    --
    -- Every check is cheap for a small payload. The size limit applies to
    -- the payload as stored, the jsonb value before compression, whose size
    -- pg_column_size reads from its header without rendering it as text;
    -- only the server checks it, so Go and SQL users meet the same limit.
    -- Nesting deeper than 126 levels (a webhook body nests the payload one
    -- level deeper, and serde_json decodes at most 127 by default) is
    -- looked for only in a payload of at least 1016 bytes: each level takes
    -- 8 (a container header and its entry in the parent), so a smaller one
    -- cannot have 127. Kinds become HTTP header values and metric labels:
    -- no control characters. The Go client checks the range of
    -- scheduled_at, kinds and depth too, with the same messages.
    SELECT x.i, coalesce(x.invalid, x.past) AS msg, CASE WHEN x.invalid IS NULL THEN 'PGS02' ELSE 'PGS01' END AS code
    INTO bad FROM (
        SELECT u.i,
            CASE
                WHEN u.o IS NULL OR u.o = '' THEN 'ordering_id is required'
                WHEN octet_length(u.o) > 255 THEN format('ordering_id is %s bytes, over the limit of 255', octet_length(u.o))
                WHEN u.sa IS NULL THEN 'scheduled_at is required'
                WHEN u.sa IN ('infinity', '-infinity') THEN 'scheduled_at must be a finite time'
                WHEN u.sa < '0001-01-01 00:00:00+00' OR u.sa >= '10000-01-01 00:00:00+00'
                    THEN 'scheduled_at is outside the supported range 0001-01-01 00:00:00 to 9999-12-31 23:59:59.999999 UTC'
                WHEN octet_length(u.uk) > 255 THEN format('uniqueness_key is %s bytes, over the limit of 255', octet_length(u.uk))
                WHEN u.k ~ '[\x01-\x1f\x7f]' THEN 'kind contains a control character'
                WHEN octet_length(u.k) > 255 THEN format('kind is %s bytes, over the limit of 255', octet_length(u.k))
                WHEN pg_column_size(u.pl) > s.max_payload_bytes
                    THEN format('payload is %s bytes as stored (jsonb), over the limit of %s bytes', pg_column_size(u.pl), s.max_payload_bytes)
                WHEN pg_column_size(u.pl) >= 1016
                     AND jsonb_path_exists(u.pl, 'strict $.**{126} ? (@.type() == "array" || @.type() == "object")')
                    THEN 'payload is nested more than 126 levels deep'
            END AS invalid,
            CASE WHEN u.sa < t_now - s.grace
                THEN format('scheduled_at %s is before now minus the grace window of %s', u.sa, s.grace)
            END AS past
        FROM unnest(ordering_ids, scheduled_ats, uniqueness_keys, payloads, kinds) WITH ORDINALITY AS u(o, sa, uk, pl, k, i)
    ) x WHERE x.invalid IS NOT NULL OR x.past IS NOT NULL ORDER BY x.i LIMIT 1;
    IF FOUND THEN
        IF n > 1 THEN
            where_ := format(' (batch item %s)', bad.i);
        END IF;
        RAISE EXCEPTION USING MESSAGE = 'pgsched: ' || bad.msg || where_, ERRCODE = bad.code;
    END IF;

    SELECT array_agg(pgsched.partition_of(u.o, s.partition_count) ORDER BY u.i) INTO parts
    FROM unnest(ordering_ids) WITH ORDINALITY AS u(o, i);

    -- Lock the head of every ordering_id in the batch, in key order (so
    -- concurrent batches and finishers cannot deadlock), writing the
    -- batch's earliest task of it as its head where it has none. fresh
    -- holds the batch positions written so; for a batch of new ordering_ids
    -- with one task each that is the whole enqueue. An existing head is
    -- locked, not rewritten (ON CONFLICT DO UPDATE ... WHERE false). The
    -- statement returns only the new heads' ids: the common batch (all
    -- written) needs no more, so only a mixed batch joins them back to its
    -- positions (two sorts and a join). The two statements differ only in ON
    -- CONFLICT, which plpgsql cannot make conditional without dynamic SQL
    -- (a plan per call).
    IF new_keys THEN
        WITH ins AS (
            INSERT INTO pgsched.heads AS h (partition_id, ordering_id, scheduled_at, uniqueness_key, kind, payload, run_at)
            SELECT f.p, f.o, f.sa, f.uk, f.k, f.pl, f.sa FROM (
                SELECT DISTINCT ON (x.p, x.o COLLATE "C") x.p, x.o COLLATE "C" AS o, x.sa, coalesce(x.uk, '') COLLATE "C" AS uk,
                       coalesce(x.pl, '{}'::jsonb) AS pl, coalesce(nullif(x.k, ''), 'default') AS k
                FROM unnest(parts, ordering_ids, scheduled_ats, uniqueness_keys, payloads, kinds) WITH ORDINALITY AS x(p, o, sa, uk, pl, k, i)
                ORDER BY x.p, x.o COLLATE "C", x.sa, coalesce(x.uk, '') COLLATE "C", x.i DESC
            ) f
            ORDER BY f.p, f.o
            RETURNING h.id
        )
        SELECT array_agg(ins.id) INTO fresh_ids FROM ins;
    ELSE
        WITH ins AS (
            INSERT INTO pgsched.heads AS h (partition_id, ordering_id, scheduled_at, uniqueness_key, kind, payload, run_at)
            SELECT f.p, f.o, f.sa, f.uk, f.k, f.pl, f.sa FROM (
                SELECT DISTINCT ON (x.p, x.o COLLATE "C") x.p, x.o COLLATE "C" AS o, x.sa, coalesce(x.uk, '') COLLATE "C" AS uk,
                       coalesce(x.pl, '{}'::jsonb) AS pl, coalesce(nullif(x.k, ''), 'default') AS k
                FROM unnest(parts, ordering_ids, scheduled_ats, uniqueness_keys, payloads, kinds) WITH ORDINALITY AS x(p, o, sa, uk, pl, k, i)
                ORDER BY x.p, x.o COLLATE "C", x.sa, coalesce(x.uk, '') COLLATE "C", x.i DESC
            ) f
            ORDER BY f.p, f.o
            ON CONFLICT (partition_id, ordering_id) DO UPDATE SET revision = h.revision WHERE false
            RETURNING h.id
        )
        SELECT array_agg(ins.id) INTO fresh_ids FROM ins;
    END IF;
    -- n heads written for n positions: every position is its key's.
    fresh_all := coalesce(cardinality(fresh_ids), 0) = n;
    IF NOT fresh_all THEN
        -- The batch may change these ordering_ids' backlogs: their heads
        -- forget their known successors first (see "Known successors").
        UPDATE pgsched.heads h SET next_tids = NULL, next_ids = NULL
        FROM (SELECT DISTINCT x.p, x.o COLLATE "C" AS o FROM unnest(parts, ordering_ids) AS x(p, o)) k
        WHERE h.partition_id = k.p AND h.ordering_id = k.o AND h.next_tids IS NOT NULL;
    END IF;
    IF NOT fresh_all AND fresh_ids IS NOT NULL THEN
        SELECT array_agg(f.i) INTO fresh FROM (
            SELECT DISTINCT ON (x.p, x.o COLLATE "C") x.p, x.o COLLATE "C" AS o, x.i
            FROM unnest(parts, ordering_ids, scheduled_ats, uniqueness_keys) WITH ORDINALITY AS x(p, o, sa, uk, i)
            ORDER BY x.p, x.o COLLATE "C", x.sa, coalesce(x.uk, '') COLLATE "C", x.i DESC
        ) f
        JOIN pgsched.heads h ON h.partition_id = f.p AND h.ordering_id = f.o
        JOIN unnest(fresh_ids) AS w(id) ON w.id = h.id;
    END IF;

    -- With the heads locked, the next statement's fresh snapshot sees every
    -- completion of these ordering_ids: a completed key never runs again.
    -- A key completes after its scheduled_at and, as its finisher held the
    -- head lock we now hold, before now: the bounds [lo, hi] prune the
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

    -- The common case: every task a new ordering_id's only task, none done.
    IF done IS NULL AND fresh_all THEN
        results := array_fill('inserted'::text, ARRAY[n]);
        IF lo <= t_now + s.notify_horizon THEN
            PERFORM pg_notify('pgsched.due', '');
        END IF;
        RETURN results;
    END IF;
    IF fresh_all THEN
        fresh := ARRAY(SELECT generate_series(1, n));
    END IF;

    -- Rare: a head just written for a completed key goes again.
    IF done IS NOT NULL AND fresh IS NOT NULL THEN
        DELETE FROM pgsched.heads h
        USING unnest(parts, ordering_ids, scheduled_ats, uniqueness_keys) WITH ORDINALITY AS u(p, o, sa, uk, i)
        WHERE u.i IN (SELECT unnest(fresh)) AND u.i IN (SELECT unnest(done))
          AND h.partition_id = u.p AND h.ordering_id = u.o AND h.scheduled_at = u.sa
          AND h.uniqueness_key = coalesce(u.uk, '') AND NOT h.running;
    END IF;

    -- Every other task of the batch: its key is an existing idle head
    -- (overwritten), a running head (PGS03 below) or goes to the backlog
    -- (inserted, or overwritten when there). Then the ordering_ids that
    -- got backlog tasks, or lost a head just written, are settled: a task
    -- earlier than an idle head takes its place.
    WITH u AS (
        SELECT x.i, x.p, x.o COLLATE "C" AS o, x.sa, coalesce(x.uk, '') COLLATE "C" AS uk,
               coalesce(x.pl, '{}'::jsonb) AS pl, coalesce(nullif(x.k, ''), 'default') AS k,
               x.i IN (SELECT unnest(done)) AS completed, x.i IN (SELECT unnest(fresh)) AS fresh
        FROM unnest(parts, ordering_ids, scheduled_ats, uniqueness_keys, payloads, kinds) WITH ORDINALITY AS x(p, o, sa, uk, pl, k, i)
    ), cand AS (
        SELECT DISTINCT ON (u.p, u.o, u.sa, u.uk) u.*
        FROM u WHERE NOT u.completed
        ORDER BY u.p, u.o, u.sa, u.uk, u.i DESC
    ), rest AS (
        SELECT c.*, h.ordering_id IS NOT NULL AS is_head, coalesce(h.running, false) AS head_running
        FROM cand c
        LEFT JOIN pgsched.heads h ON h.partition_id = c.p AND h.ordering_id = c.o
                                 AND h.scheduled_at = c.sa AND h.uniqueness_key = c.uk
        WHERE NOT c.fresh
    ), hu AS (
        UPDATE pgsched.heads h SET kind = r.k, payload = r.pl, revision = h.revision + 1
        FROM rest r
        WHERE r.is_head AND NOT r.head_running AND h.partition_id = r.p AND h.ordering_id = r.o
        RETURNING h.partition_id, h.ordering_id, h.scheduled_at, h.uniqueness_key
    ), bl AS (
        INSERT INTO pgsched.backlog AS b (partition_id, ordering_id, scheduled_at, uniqueness_key, kind, payload, run_at)
        SELECT r.p, r.o, r.sa, r.uk, r.k, r.pl, r.sa FROM rest r WHERE NOT r.is_head
        ORDER BY r.p, r.o, r.sa, r.uk
        ON CONFLICT (partition_id, ordering_id, scheduled_at, uniqueness_key) DO UPDATE
        SET kind = excluded.kind, payload = excluded.payload, revision = b.revision + 1
        RETURNING b.partition_id, b.ordering_id, b.scheduled_at, b.uniqueness_key, (b.revision = 0) AS inserted
    ), kr AS (
        SELECT c.p, c.o, c.sa, c.uk, 'inserted' AS r FROM cand c WHERE c.fresh
        UNION ALL
        SELECT r.p, r.o, r.sa, r.uk, NULL FROM rest r WHERE r.head_running
        UNION ALL
        SELECT x.partition_id, x.ordering_id, x.scheduled_at, x.uniqueness_key, 'updated' FROM hu x
        UNION ALL
        SELECT x.partition_id, x.ordering_id, x.scheduled_at, x.uniqueness_key,
               CASE WHEN x.inserted THEN 'inserted' ELSE 'updated' END FROM bl x
    ), res AS (
        SELECT array_agg(CASE WHEN u.completed THEN 'already_completed' ELSE kr.r END ORDER BY u.i) AS results
        FROM u LEFT JOIN kr ON kr.p = u.p AND kr.o = u.o AND kr.sa = u.sa AND kr.uk = u.uk
    ), st AS (
        SELECT array_agg(x.partition_id) AS p, array_agg(x.ordering_id) AS o FROM bl x
    )
    SELECT res.results, st.p, st.o INTO results, settle_p, settle_o FROM res, st;

    bad_at := array_position(results, NULL);
    IF bad_at IS NOT NULL THEN
        IF n > 1 THEN
            where_ := format(' (batch item %s)', bad_at);
        END IF;
        RAISE EXCEPTION 'pgsched: task (%, %, %) is running and cannot be changed%',
            ordering_ids[bad_at], scheduled_ats[bad_at], coalesce(uniqueness_keys[bad_at], ''), where_
            USING ERRCODE = 'PGS03';
    END IF;

    IF done IS NOT NULL THEN
        SELECT settle_p || array_agg(u.p), settle_o || array_agg(u.o) INTO settle_p, settle_o
        FROM unnest(parts, ordering_ids) WITH ORDINALITY AS u(p, o, i) WHERE u.i IN (SELECT unnest(done));
    END IF;
    IF settle_p IS NOT NULL THEN
        PERFORM pgsched.settle_heads(settle_p, settle_o);
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
    uk text := coalesce(uniqueness_key, '');
    hd record;
BEGIN
    SELECT * INTO hd FROM pgsched.lock_head(p, ordering_id);
    IF FOUND AND hd.scheduled_at = cancel.scheduled_at AND hd.uniqueness_key = uk THEN
        IF hd.running THEN
            RAISE EXCEPTION 'pgsched: task (%, %, %) is running and cannot be cancelled',
                ordering_id, scheduled_at, uk USING ERRCODE = 'PGS03';
        END IF;
        DELETE FROM pgsched.heads h WHERE h.partition_id = p AND h.ordering_id = cancel.ordering_id;
        PERFORM pgsched.settle_heads(ARRAY[p], ARRAY[ordering_id]);
        RETURN;
    END IF;
    IF FOUND THEN
        DELETE FROM pgsched.backlog b
        WHERE b.partition_id = p AND b.ordering_id = cancel.ordering_id
          AND b.scheduled_at = cancel.scheduled_at AND b.uniqueness_key = uk;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgsched: no pending task (%, %, %)', ordering_id, scheduled_at, uk
            USING ERRCODE = 'PGS04';
    END IF;
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
    hd record;
BEGIN
    SELECT * INTO STRICT s FROM pgsched.settings;
    IF new_scheduled_at IS NULL OR new_scheduled_at IN ('infinity', '-infinity') THEN
        RAISE EXCEPTION 'pgsched: new_scheduled_at is required and must be finite' USING ERRCODE = 'PGS01';
    END IF;
    IF new_scheduled_at < '0001-01-01 00:00:00+00' OR new_scheduled_at >= '10000-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'pgsched: new_scheduled_at is outside the supported range 0001-01-01 00:00:00 to 9999-12-31 23:59:59.999999 UTC'
            USING ERRCODE = 'PGS01';
    END IF;
    IF new_scheduled_at < now() - s.grace THEN
        RAISE EXCEPTION 'pgsched: new_scheduled_at % is before now minus the grace window of %', new_scheduled_at, s.grace
            USING ERRCODE = 'PGS02';
    END IF;
    p := pgsched.partition_of(ordering_id, s.partition_count);
    SELECT * INTO hd FROM pgsched.lock_head(p, ordering_id);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgsched: no pending task (%, %, %)', ordering_id, scheduled_at, uk USING ERRCODE = 'PGS04';
    END IF;
    IF hd.scheduled_at = reschedule.scheduled_at AND hd.uniqueness_key = uk AND hd.running THEN
        RAISE EXCEPTION 'pgsched: task (%, %, %) is running and cannot be rescheduled', ordering_id, scheduled_at, uk
            USING ERRCODE = 'PGS03';
    END IF;
    IF new_scheduled_at <> scheduled_at AND (
        (hd.scheduled_at = new_scheduled_at AND hd.uniqueness_key = uk)
        OR EXISTS (SELECT 1 FROM pgsched.backlog b WHERE b.partition_id = p AND b.ordering_id = reschedule.ordering_id
                   AND b.scheduled_at = new_scheduled_at AND b.uniqueness_key = uk)
        OR EXISTS (SELECT 1 FROM pgsched.completions c WHERE c.partition_id = p AND c.ordering_id = reschedule.ordering_id
                   AND c.scheduled_at = new_scheduled_at AND c.uniqueness_key = uk AND c.completed_at >= new_scheduled_at)) THEN
        RAISE EXCEPTION 'pgsched: a task (%, %, %) already exists or was completed', ordering_id, new_scheduled_at, uk
            USING ERRCODE = 'PGS05';
    END IF;
    IF hd.scheduled_at = reschedule.scheduled_at AND hd.uniqueness_key = uk THEN
        UPDATE pgsched.heads h SET scheduled_at = new_scheduled_at, run_at = new_scheduled_at
        WHERE h.partition_id = p AND h.ordering_id = reschedule.ordering_id;
    ELSE
        UPDATE pgsched.backlog b SET scheduled_at = new_scheduled_at, run_at = new_scheduled_at
        WHERE b.partition_id = p AND b.ordering_id = reschedule.ordering_id
          AND b.scheduled_at = reschedule.scheduled_at AND b.uniqueness_key = uk;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'pgsched: no pending task (%, %, %)', ordering_id, scheduled_at, uk USING ERRCODE = 'PGS04';
        END IF;
    END IF;
    PERFORM pgsched.settle_heads(ARRAY[p], ARRAY[ordering_id]);
    IF new_scheduled_at <= now() + s.notify_horizon THEN
        PERFORM pg_notify('pgsched.due', '');
    END IF;
END
$$;
-- +goose StatementEnd

-- claim_due_many claims up to p_max due idle heads from the given
-- partitions, in the order given (callers pass the most overdue first), for
-- the node (p_node_id, p_epoch) while its lease is live, and returns them:
-- one transaction, so one commit (one WAL flush) however many partitions it
-- spans, and one row update per task. Each statement locks rows of one
-- partition only. With p_ahead_seconds, heads due within that much of now
-- are claimed too: the worker holds them and starts each on time, so a
-- claim's round trip and commit are not part of a task's start lateness.
--
-- Heads are locked with SKIP LOCKED in a CTE (never IN (subquery ... FOR
-- UPDATE), which can update more rows than the limit), then updated by
-- ctid, so no plan scans a partition per claimed task, even on tables
-- never analyzed. Seq scans are disabled because the planner, costing a
-- ctid fetch as a random page read, prefers scanning a small partition
-- whole to fetching 100 tuples; generic plans because plpgsql would
-- otherwise re-plan the statement for every partition.
-- +goose StatementBegin
CREATE FUNCTION pgsched.claim_due_many(p_node_id text, p_epoch bigint, p_partitions integer[], p_max integer,
                                       p_ahead_seconds float8 DEFAULT 0)
RETURNS SETOF pgsched.heads
LANGUAGE plpgsql
SET jit = off
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
            SELECT h.ctid AS tid FROM pgsched.heads h
            WHERE h.partition_id = p AND h.chain = 0 AND NOT h.running AND h.run_at <= horizon
              AND EXISTS (SELECT 1 FROM pgsched.nodes n
                          WHERE n.node_id = p_node_id AND n.epoch = p_epoch AND n.lease_expires_at > now())
            ORDER BY h.run_at
            LIMIT left_
            FOR UPDATE SKIP LOCKED
        )
        UPDATE pgsched.heads h
        SET running = true, node_id = p_node_id, epoch = p_epoch, attempt = h.attempt + 1, claimed_at = now()
        WHERE h.partition_id = p AND h.ctid = ANY (ARRAY(SELECT q.tid FROM q)) AND NOT h.running
        RETURNING h.*;
        GET DIAGNOSTICS got = ROW_COUNT;
        left_ := left_ - got;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- finish_tasks records what happened to running tasks, in one batch:
-- outcome 'completed' deletes the task and writes its tombstone, 'dead' moves
-- it to dead_tasks, 'retry' makes it pending again retry_delay seconds from
-- now (the database's now), 'release' makes it pending again as it was (a
-- graceful stop gave it back). Only tasks still held by the claim the
-- outcome is for change: (node_id, epoch) and the claim's claimed_at. So a
-- stale node's late writes change nothing, and neither does an outcome
-- statement retried after its first try committed unseen, once the same
-- node and term have claimed the task again (a retry that came due, or a
-- release): each claim has its own claimed_at. Returns one row per
-- successor handed straight to the node as running (see below), shaped as
-- a claim returns it, and then one row whose applied holds the ids of the
-- tasks that changed and claimable how many heads the call left for a
-- claim (promoted and not handed over, or given back; the other columns
-- null). Rows rather than an array of heads: building the array and
-- unnesting it again cost a tenth of the call.
--
-- Heads are changed in key order, so enqueuers (which lock heads in that
-- order too) and finishers cannot deadlock: a batch of completions alone is
-- one delete, driven by the sorted batch through a nested loop of primary
-- key probes (hash and merge joins are off so the order holds); a batch
-- with retries or releases locks its heads first.
--
-- Promotion: for each deleted head whose ordering_id has a backlog, the
-- earliest backlog task becomes the head, in a second statement (a fresh
-- snapshot, taken with the deleted heads locked, so a task enqueued
-- meanwhile is seen). Per ordering_id: one index scan for the first two
-- backlog tasks by (scheduled_at, uniqueness_key) (the first, and whether
-- there is more), a second probe only when both have the same
-- scheduled_at (the earlier enqueued wins), a delete by ctid and an
-- insert. The first statement deletes at most one head per ordering_id,
-- so the promotion needs no grouping or sort, and runs inline rather than
-- in a function of its own, whose result rows would be copied.
--
-- Handing over: up to p_chain of the new heads are inserted already
-- running for (p_node_id, p_epoch), as a claim would, and returned: those
-- due now, in p_chain_partitions, whose predecessor's chain is below
-- p_chain_limit, and only while the node's lease is live. It spares the
-- finished task's successor a claim of its own (the claim's index scan and
-- update), and the limit makes a long chain go through a claim now and
-- then, so other ordering_ids waiting in the node's partitions get their
-- turn. When p_chain is below the number of promotions, only the first
-- p_chain promotions in the order the delete returned their heads may
-- hand over (the worker passes the number of tasks the batch finishes,
-- which is never below it). A NULL p_chain_partitions or p_chain_limit
-- hands nothing over.
-- +goose StatementBegin
CREATE FUNCTION pgsched.finish_tasks(
    p_node_id      text,
    p_epoch        bigint,
    partition_ids  integer[],
    ordering_ids   text[],
    task_ids       bigint[],
    claimed_ats    timestamptz[],
    outcomes       text[],
    retry_delays   float8[],
    errors         text[],
    p_chain        integer DEFAULT 0,
    p_chain_partitions integer[] DEFAULT NULL,
    p_chain_limit  integer DEFAULT 0
)
RETURNS TABLE (applied bigint[], partition_id integer, id bigint, ordering_id text, scheduled_at timestamptz,
               uniqueness_key text, kind text, payload jsonb, attempt integer, run_at timestamptz,
               claimed_at timestamptz, claimable integer)
LANGUAGE plpgsql
SET jit = off
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_material = off
AS $$
#variable_conflict use_column
DECLARE
    gone_p  integer[];
    gone_o  text[];
    gone_c  integer[];
    gone_id bigint[];
    back_p  integer[];
    back_o  text[];
    back_id bigint[];
    room    integer := coalesce(p_chain, 0);
    known_n integer;
    moved_n integer;
    fast    pgsched.heads[];
    promoted integer := 0;
    handed  integer := 0;
    handed2 integer;
BEGIN
    IF EXISTS (SELECT 1 FROM unnest(outcomes) AS x(outcome) WHERE x.outcome NOT IN ('completed', 'dead')) THEN
        PERFORM pgsched.lock_heads(partition_ids, ordering_ids);
    END IF;

    IF room > 0 AND NOT EXISTS (SELECT 1 FROM pgsched.nodes n
                                WHERE n.node_id = p_node_id AND n.epoch = p_epoch AND n.lease_expires_at > now()) THEN
        room := 0;
    END IF;

    -- Completed and dead tasks leave; where the head knew its successor
    -- (next_tids, see "Known successors"), the successor moves up in the
    -- same statement, by ctid.
    WITH gone AS (
        DELETE FROM pgsched.heads h
        USING (
            SELECT b.p, b.o COLLATE "C" AS o, b.id, b.ca, b.outcome, b.err
            FROM unnest(partition_ids, ordering_ids, task_ids, claimed_ats, outcomes, errors) AS b(p, o, id, ca, outcome, err)
            WHERE b.outcome IN ('completed', 'dead')
            ORDER BY b.p, o
        ) b
        -- Held by this node means running (CHECK on heads).
        WHERE h.partition_id = b.p AND h.ordering_id = b.o AND h.id = b.id
          AND h.node_id = p_node_id AND h.epoch = p_epoch AND h.claimed_at = b.ca
        RETURNING h.*, b.outcome, b.err
    ), tomb AS (
        INSERT INTO pgsched.completions (partition_id, ordering_id, scheduled_at, uniqueness_key, kind, attempt, node_id, completed_at)
        SELECT g.partition_id, g.ordering_id, g.scheduled_at, g.uniqueness_key, g.kind, g.attempt, g.node_id, now()
        FROM gone g WHERE g.outcome = 'completed'
    ), dead AS (
        INSERT INTO pgsched.dead_tasks (partition_id, id, ordering_id, scheduled_at, uniqueness_key, kind, payload, attempt, last_error, node_id)
        SELECT g.partition_id, g.id, g.ordering_id, g.scheduled_at, g.uniqueness_key, g.kind, g.payload, g.attempt, g.err, g.node_id
        FROM gone g WHERE g.outcome = 'dead'
    ), known AS (
        SELECT g.partition_id AS p, g.ordering_id AS o, g.chain AS c, g.next_tids[1] AS tid, g.next_ids[1] AS id,
               g.next_tids[2:] AS rest_tids, g.next_ids[2:] AS rest_ids, g.next_more AS more_after,
               row_number() OVER () AS i
        FROM gone g WHERE g.backlog AND cardinality(g.next_tids) > 0
    ), moved AS (
        DELETE FROM pgsched.backlog b USING known k
        WHERE b.partition_id = k.p AND b.ctid = k.tid AND b.id = k.id AND b.ordering_id = k.o
        RETURNING b.*, k.rest_tids, k.rest_ids, k.more_after, k.c AS prev_chain,
                  coalesce(k.i <= room AND b.run_at <= now() AND k.c < p_chain_limit
                           AND b.partition_id = ANY (p_chain_partitions), false) AS run
    ), ins AS (
        INSERT INTO pgsched.heads AS h (partition_id, ordering_id, scheduled_at, uniqueness_key, id, kind, payload,
                                        run_at, attempt, revision, last_error, created_at, backlog,
                                        running, node_id, epoch, claimed_at, chain, next_tids, next_ids, next_more)
        SELECT m.partition_id, m.ordering_id, m.scheduled_at, m.uniqueness_key, m.id, m.kind, m.payload,
               m.run_at, m.attempt + m.run::integer, m.revision, m.last_error, m.created_at,
               cardinality(m.rest_tids) > 0 OR m.more_after,
               m.run, CASE WHEN m.run THEN p_node_id END, CASE WHEN m.run THEN p_epoch END,
               CASE WHEN m.run THEN now() END, CASE WHEN m.run THEN m.prev_chain + 1 ELSE 0 END,
               CASE WHEN cardinality(m.rest_tids) > 0 THEN m.rest_tids END,
               CASE WHEN cardinality(m.rest_tids) > 0 THEN m.rest_ids END, m.more_after
        FROM moved m
        RETURNING h.*
    )
    SELECT array_agg(g.partition_id) FILTER (WHERE g.backlog AND coalesce(cardinality(g.next_tids), 0) = 0),
           array_agg(g.ordering_id) FILTER (WHERE g.backlog AND coalesce(cardinality(g.next_tids), 0) = 0),
           array_agg(g.chain) FILTER (WHERE g.backlog AND coalesce(cardinality(g.next_tids), 0) = 0),
           array_agg(g.id), count(*) FILTER (WHERE g.backlog AND cardinality(g.next_tids) > 0),
           (SELECT count(*) FROM ins), (SELECT array_agg(x::pgsched.heads) FROM ins x WHERE x.running)
    INTO gone_p, gone_o, gone_c, gone_id, known_n, moved_n, fast FROM gone g;

    IF fast IS NOT NULL THEN
        RETURN QUERY
        SELECT NULL::bigint[], x.partition_id, x.id, x.ordering_id::text, x.scheduled_at, x.uniqueness_key::text,
               x.kind, x.payload, x.attempt, x.run_at, x.claimed_at, NULL::integer
        FROM unnest(fast) x;
        handed := cardinality(fast);
    END IF;
    promoted := moved_n;

    IF gone_p IS NOT NULL THEN
        -- The others' next task: the first backlog task of each by
        -- (scheduled_at, id), in a statement of its own, whose fresh
        -- snapshot (taken with the heads deleted, so locked) sees every
        -- task enqueued before. One index scan reads the first 18 by
        -- (scheduled_at, uniqueness_key): the first is the successor
        -- unless the second has the same scheduled_at (then a second
        -- probe takes the earliest enqueued), and if no two share a
        -- scheduled_at the next 16 become the new head's known
        -- successors.
        RETURN QUERY
        WITH pick AS (
            SELECT k.p, k.c, k.i, coalesce(t.tid, f.tids[1]) AS tid, f.n > 1 AS more,
                   CASE WHEN f.n > 1 AND f.nd = f.n THEN f.tids[2:17] END AS next_tids,
                   CASE WHEN f.n > 1 AND f.nd = f.n THEN f.ids[2:17] END AS next_ids,
                   f.n = 18 AS next_more
            FROM unnest(gone_p, gone_o, gone_c) WITH ORDINALITY AS k(p, o, c, i)
            CROSS JOIN LATERAL (
                SELECT array_agg(x.tid ORDER BY x.scheduled_at, x.uniqueness_key) AS tids,
                       array_agg(x.id ORDER BY x.scheduled_at, x.uniqueness_key) AS ids,
                       min(x.scheduled_at) AS sa1, count(*) AS n, count(DISTINCT x.scheduled_at) AS nd
                FROM (
                    SELECT b.ctid AS tid, b.id, b.scheduled_at, b.uniqueness_key FROM pgsched.backlog b
                    WHERE b.partition_id = k.p AND b.ordering_id = k.o
                    ORDER BY b.scheduled_at, b.uniqueness_key LIMIT 18
                ) x
            ) f
            LEFT JOIN LATERAL (
                SELECT b.ctid AS tid FROM pgsched.backlog b
                WHERE f.n > 1 AND f.nd < f.n
                  AND b.partition_id = k.p AND b.ordering_id = k.o AND b.scheduled_at = f.sa1
                ORDER BY b.id LIMIT 1
            ) t ON true
        ), moved AS (
            DELETE FROM pgsched.backlog b USING pick
            WHERE b.partition_id = pick.p AND b.ctid = pick.tid
            RETURNING b.*, pick.more, pick.next_tids, pick.next_ids, pick.next_more, pick.c AS prev_chain,
                      coalesce(pick.i + known_n <= room AND b.run_at <= now() AND pick.c < p_chain_limit
                               AND b.partition_id = ANY (p_chain_partitions), false) AS run
        ), ins AS (
            INSERT INTO pgsched.heads AS h (partition_id, ordering_id, scheduled_at, uniqueness_key, id, kind, payload,
                                            run_at, attempt, revision, last_error, created_at, backlog,
                                            running, node_id, epoch, claimed_at, chain, next_tids, next_ids, next_more)
            SELECT m.partition_id, m.ordering_id, m.scheduled_at, m.uniqueness_key, m.id, m.kind, m.payload,
                   m.run_at, m.attempt + m.run::integer, m.revision, m.last_error, m.created_at, m.more,
                   m.run, CASE WHEN m.run THEN p_node_id END, CASE WHEN m.run THEN p_epoch END,
                   CASE WHEN m.run THEN now() END, CASE WHEN m.run THEN m.prev_chain + 1 ELSE 0 END,
                   m.next_tids, m.next_ids, m.next_more
            FROM moved m
            RETURNING h.partition_id, h.id, h.ordering_id, h.scheduled_at, h.uniqueness_key, h.kind, h.payload,
                      h.attempt, h.run_at, h.claimed_at, h.running
        )
        SELECT NULL::bigint[], x.partition_id, x.id, x.ordering_id::text, x.scheduled_at, x.uniqueness_key::text,
               x.kind, x.payload, x.attempt, x.run_at, x.claimed_at, NULL::integer
        FROM ins x WHERE x.running;
        GET DIAGNOSTICS handed2 = ROW_COUNT;
        handed := handed + handed2;
        promoted := promoted + cardinality(gone_p);
    END IF;

    IF moved_n < known_n THEN
        -- A known successor was not where its head said (never, while
        -- every writer keeps the rule; a table rewrite moves rows): the
        -- general path gives these ordering_ids a head.
        SELECT array_agg(u.p), array_agg(u.o) INTO back_p, back_o
        FROM unnest(partition_ids, ordering_ids, outcomes) AS u(p, o, outcome)
        WHERE u.outcome IN ('completed', 'dead')
          AND NOT EXISTS (SELECT 1 FROM pgsched.heads h WHERE h.partition_id = u.p AND h.ordering_id = u.o);
        IF back_p IS NOT NULL THEN
            PERFORM pgsched.settle_heads(back_p, back_o);
            promoted := promoted + cardinality(back_p);
        END IF;
        back_p := NULL;
        back_o := NULL;
    END IF;

    IF cardinality(gone_id) IS DISTINCT FROM cardinality(task_ids) THEN
        WITH back AS (
            UPDATE pgsched.heads h
            SET running = false, node_id = NULL, epoch = NULL, claimed_at = NULL, chain = 0,
                run_at = CASE WHEN b.outcome = 'retry' THEN now() + make_interval(secs => coalesce(b.retry_delay, 0)) ELSE h.run_at END,
                attempt = CASE WHEN b.outcome = 'release' THEN greatest(h.attempt - 1, 0) ELSE h.attempt END,
                last_error = CASE WHEN b.outcome = 'retry' THEN b.err ELSE h.last_error END
            FROM unnest(partition_ids, ordering_ids, task_ids, claimed_ats, outcomes, retry_delays, errors)
                 AS b(p, o, id, ca, outcome, retry_delay, err)
            WHERE h.partition_id = b.p AND h.ordering_id = b.o AND h.id = b.id
              AND h.node_id = p_node_id AND h.epoch = p_epoch AND h.claimed_at = b.ca AND b.outcome IN ('retry', 'release')
            RETURNING h.partition_id, h.ordering_id, h.id
        )
        SELECT array_agg(k.partition_id), array_agg(k.ordering_id), array_agg(k.id)
        INTO back_p, back_o, back_id FROM back k;
        IF back_id IS NOT NULL THEN
            -- A task enqueued earlier than the one given back runs first.
            PERFORM pgsched.settle_heads(back_p, back_o);
        END IF;
    END IF;

    applied := coalesce(gone_id, '{}') || coalesce(back_id, '{}');
    -- Heads this call left idle for a claim to take: promoted and not
    -- handed over (those looked for by the second statement counted from
    -- the heads flagged as having a backlog, so one whose backlog a cancel
    -- emptied meanwhile counts too), and given back. Zero tells the worker
    -- nothing new may have become due.
    claimable := promoted - handed + coalesce(cardinality(back_id), 0);
    RETURN NEXT;
END
$$;
-- +goose StatementEnd

-- rescue_expired gives the running tasks of nodes whose lease has expired
-- (or whose row is gone) back to their ordering_ids, to run again at once.
-- With p_nodes given, only those nodes' tasks are rescued; else those of
-- every node whose row says its lease expired, and with p_orphans those of
-- every node without a live lease, rows or not. Running heads have no
-- index (a claim stays a HOT update), so this reads the heads table:
-- callers rescue nodes as they die, and sweep (p_orphans) now and then.
-- Returns the count.
-- +goose StatementBegin
CREATE FUNCTION pgsched.rescue_expired(p_nodes text[] DEFAULT NULL, p_orphans boolean DEFAULT false)
RETURNS integer
LANGUAGE plpgsql
SET jit = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_material = off
AS $$
DECLARE
    cands  text[] := p_nodes;
    lost_p integer[];
    lost_o text[];
    n integer;
BEGIN
    IF cands IS NULL AND NOT p_orphans THEN
        SELECT coalesce(array_agg(nd.node_id), '{}') INTO cands FROM pgsched.nodes nd WHERE nd.lease_expires_at < now();
    END IF;
    IF cardinality(cands) = 0 THEN
        RETURN 0;
    END IF;

    SELECT array_agg(h.partition_id), array_agg(h.ordering_id)
    INTO lost_p, lost_o
    FROM pgsched.heads h
    LEFT JOIN pgsched.nodes nd ON nd.node_id = h.node_id AND nd.epoch = h.epoch
    WHERE h.running AND (cands IS NULL OR h.node_id = ANY (cands))
      AND (nd.node_id IS NULL OR nd.lease_expires_at < now());
    IF lost_p IS NULL THEN
        RETURN 0;
    END IF;

    PERFORM pgsched.lock_heads(lost_p, lost_o);

    WITH back AS (
        UPDATE pgsched.heads h
        SET running = false, last_error = format('node %s (epoch %s) lost its lease while running this task', h.node_id, h.epoch),
            node_id = NULL, epoch = NULL, claimed_at = NULL, chain = 0
        FROM unnest(lost_p, lost_o) AS b(p, o)
        WHERE h.partition_id = b.p AND h.ordering_id = b.o AND h.running
          AND NOT EXISTS (SELECT 1 FROM pgsched.nodes x WHERE x.node_id = h.node_id AND x.epoch = h.epoch AND x.lease_expires_at >= now())
        RETURNING h.partition_id, h.ordering_id
    )
    SELECT array_agg(back.partition_id), array_agg(back.ordering_id) INTO lost_p, lost_o FROM back;
    n := coalesce(cardinality(lost_p), 0);
    IF n = 0 THEN
        RETURN 0;
    END IF;

    PERFORM pgsched.settle_heads(lost_p, lost_o);
    PERFORM pg_notify('pgsched.due', '');
    RETURN n;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- The schema itself stays: goose keeps its version table there.
DROP FUNCTION pgsched.rescue_expired, pgsched.finish_tasks, pgsched.claim_due_many, pgsched.reschedule, pgsched.cancel,
    pgsched.schedule, pgsched.schedule_many, pgsched.settle_heads, pgsched.lock_head, pgsched.lock_heads, pgsched.ensure_completion_partitions,
    pgsched.partition_of;
DROP VIEW pgsched.tasks;
DROP TABLE pgsched.nodes, pgsched.dead_tasks, pgsched.completions, pgsched.backlog, pgsched.heads, pgsched.settings;
DROP SEQUENCE pgsched.epoch_seq, pgsched.task_id_seq;
