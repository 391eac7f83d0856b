-- Core storage of pgsched: pending tasks, ordering queues, completion
-- tombstones, dead tasks and node leases. Tables, indexes and sequences
-- only: the SQL API (schedule, cancel, claim_due_many, finish_tasks, ...)
-- and the views live one per file in db/functions and db/views, which the
-- migrator applies after the migrations, so changing a function is a
-- one-file diff and never a new migration.
--
-- Every object lives in the schema named "pgsched" here; the migrator
-- rewrites the qualifier "pgsched." when a different schema is chosen at
-- migrate time, and reads the partition count from the setting
-- pgsched.partition_count.

-- +goose Up
-- The schema itself is created by the migrator, which keeps goose's
-- version table in it.

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

-- +goose Down
-- The schema itself stays: goose keeps its version table there.
DROP TABLE pgsched.nodes, pgsched.dead_tasks, pgsched.completions, pgsched.backlog, pgsched.heads, pgsched.settings;
DROP SEQUENCE pgsched.epoch_seq, pgsched.task_id_seq;
