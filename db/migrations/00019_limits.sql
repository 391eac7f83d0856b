-- Limits per kind (pgsched.set_limit): at most max_running of a kind's
-- tasks running at once, cluster-wide, and at most max_starts started in
-- any window of length per. A limit is a row, so every node sees it and it
-- survives restarts.
--
-- limit_usage holds what the limits count, one row per limited kind:
-- running, the tasks of the kind that a claim started under the limit and
-- whose outcome is not yet written (prefetched ones and a frozen node's
-- included, until their outcome or a rescue), and starts, the times of the
-- starts in the last window. Claims add to it and finishes and rescues take
-- from it, in the statements that change the tasks, so no claim counts
-- rows. A row outlives its limit while tasks it counted still run, so a
-- limit set again counts them.
--
-- An idle head of a limited kind is parked: chain -1 instead of 0, as it
-- is written (schedule_many, settle_heads, a finish's promotion, a give-
-- back, a rescue), by set_limit for the heads it finds, and by the
-- leader's limit_sweep for heads written around a set_limit or
-- clear_limit. That takes it out of heads_due, the index every claim
-- scans, so a backlog held back by a limit costs the other kinds' claims
-- nothing; parked heads are claimed from heads_limited_kind as the limit
-- allows. A head claimed under a limit runs with chain -2: out of the
-- parked indexes, and how its finish or rescue knows it counts in
-- limit_usage.

-- +goose Up
CREATE TABLE pgsched.kind_limits (
    kind        text PRIMARY KEY,
    max_running integer,
    max_starts  integer,
    per         interval,
    -- max_running bounds each group (group_key) of the kind apart.
    per_group   boolean NOT NULL DEFAULT false,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CHECK (octet_length(kind) BETWEEN 1 AND 255),
    CHECK (max_running IS NULL OR max_running >= 1),
    CHECK (max_starts IS NULL OR max_starts BETWEEN 1 AND 10000),
    CHECK ((max_starts IS NULL) = (per IS NULL)),
    CHECK (per IS NULL OR per > interval '0'),
    CHECK (max_running IS NOT NULL OR max_starts IS NOT NULL),
    CHECK (NOT per_group OR (max_running IS NOT NULL AND max_starts IS NULL))
);

CREATE TABLE pgsched.limit_usage (
    kind    text PRIMARY KEY,
    running integer NOT NULL DEFAULT 0,
    starts  timestamptz[] NOT NULL DEFAULT '{}',
    -- Fair share: the group (group_key, '' for none) the kind's last claim
    -- served last; the next starts after it (limit_groups).
    last_group text
);

ALTER TABLE pgsched.heads DROP CONSTRAINT heads_check1;
ALTER TABLE pgsched.heads ADD CONSTRAINT heads_idle_chain CHECK (running OR chain IN (0, -1));
-- A claim of a limited kind takes its earliest parked heads across the
-- node's partitions in one statement, and the due read finds the earliest
-- with one probe: by kind, then time.
CREATE INDEX heads_limited_kind ON pgsched.heads (kind, run_at) WHERE chain = -1 AND NOT paused;
-- What a per-group limit counts: a kind's running tasks by group ('' for
-- none), beside the kind's row in limit_usage.
CREATE TABLE pgsched.limit_group_usage (
    kind      text NOT NULL,
    group_key text NOT NULL,
    running   integer NOT NULL DEFAULT 0,
    PRIMARY KEY (kind, group_key)
);

-- Fair share: a limited kind's groups in turn, each group's parked heads by time.
CREATE INDEX heads_limited_group ON pgsched.heads (kind, (coalesce(group_key, '')), run_at) WHERE chain = -1 AND NOT paused;

-- The leader's count per kind tells how many pending tasks wait parked.
ALTER TABLE pgsched.kind_counts ADD COLUMN held bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE pgsched.kind_counts DROP COLUMN held;
UPDATE pgsched.heads SET chain = 0 WHERE chain < 0;
DROP INDEX pgsched.heads_limited_group;
DROP INDEX pgsched.heads_limited_kind;
ALTER TABLE pgsched.heads DROP CONSTRAINT heads_idle_chain;
ALTER TABLE pgsched.heads ADD CONSTRAINT heads_check1 CHECK (running OR chain = 0);
DROP TABLE pgsched.limit_group_usage;
DROP TABLE pgsched.limit_usage;
DROP TABLE pgsched.kind_limits;
