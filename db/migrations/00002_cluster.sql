-- The cluster: one leader lease and the partition owners and backups the
-- leader writes. The views that show who serves what (db/views: cluster,
-- partitions, stand_ins) are what nodes read their duties from, so what
-- psql shows is what the nodes do (up to one refresh interval).
--
-- Small tables only (Citus: reference tables). Every lease comparison uses
-- the database clock.

-- +goose Up
-- A node that is stopping cleanly marks itself leaving: it keeps its lease
-- (so the outcomes of the tasks it drains still count) but serves nothing
-- more, so its backup and then the leader take its partitions over at
-- once instead of after the drain.
ALTER TABLE pgsched.nodes ADD COLUMN leaving boolean NOT NULL DEFAULT false;

CREATE SEQUENCE pgsched.leader_term_seq;

-- The leader lease: at most one row. term grows with every new leadership,
-- so "did leadership change hands" is a comparison of terms.
CREATE TABLE pgsched.leader (
    singleton        boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    node_id          text        NOT NULL,
    epoch            bigint      NOT NULL, -- the leader node's lease epoch
    term             bigint      NOT NULL,
    elected_at       timestamptz NOT NULL,
    renewed_at       timestamptz NOT NULL,
    lease_expires_at timestamptz NOT NULL
);

-- The owner of every logical partition, written by the leader only. A dead
-- owner keeps its partitions (served by its stand-in) until depletion.
CREATE TABLE pgsched.partition_owners (
    partition_id integer PRIMARY KEY,
    node_id      text,        -- NULL until the first assignment
    term         bigint,      -- leader term that assigned it
    assigned_at  timestamptz
);

INSERT INTO pgsched.partition_owners (partition_id)
SELECT generate_series(0, s.partition_count - 1) FROM pgsched.settings s;

-- The backup of every member node, written by the leader only.
CREATE TABLE pgsched.backups (
    node_id        text        PRIMARY KEY,
    backup_node_id text        NOT NULL CHECK (backup_node_id <> node_id),
    term           bigint      NOT NULL,
    assigned_at    timestamptz NOT NULL
);

-- +goose Down
DROP TABLE pgsched.backups, pgsched.partition_owners, pgsched.leader;
DROP SEQUENCE pgsched.leader_term_seq;
ALTER TABLE pgsched.nodes DROP COLUMN leaving;
