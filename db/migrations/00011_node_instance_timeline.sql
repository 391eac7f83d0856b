-- Two facts a registration needs that the nodes table did not keep.
--
-- instance: which process holds a node id. A process draws a random
-- instance when it starts; a registration under a node id whose live
-- lease belongs to another instance waits until that lease ends, so two
-- processes started with the same PGSCHED_NODE_ID never both hold it.
--
-- timeline: the PostgreSQL timeline the term was registered on
-- (pgsched.timeline()). A promoted standby, or a point-in-time recovery,
-- starts a new timeline whose rows may be older than what nodes last
-- wrote on the old one (asynchronous replication loses the last commits,
-- lease renewals and claims included). Claims and renewals accept only
-- terms of the current timeline, and the first registration on a new
-- timeline records, in timelines, the moment until which no node may
-- register there: one lease TTL, by which time every term of the old
-- timeline has ended by its own node's clock. 0 means unknown: rows of
-- nodes that registered before this migration, and every row on Citus,
-- where each server has a timeline of its own.

-- +goose Up
ALTER TABLE pgsched.nodes
    ADD COLUMN instance text NOT NULL DEFAULT '',
    ADD COLUMN timeline integer NOT NULL DEFAULT 0;

CREATE TABLE pgsched.timelines (
    timeline    integer     PRIMARY KEY,
    first_seen  timestamptz NOT NULL, -- the first registration on it
    leases_from timestamptz NOT NULL  -- no node registers on it before this
);

-- +goose Down
DROP TABLE pgsched.timelines;
ALTER TABLE pgsched.nodes DROP COLUMN instance, DROP COLUMN timeline;
