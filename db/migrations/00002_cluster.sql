-- The cluster: one leader lease, the partition owners and backups the leader
-- writes, and views that show who serves what (pgsched.cluster,
-- pgsched.partitions, pgsched.stand_ins). Nodes read their duties from the
-- same views a person queries with psql, so what psql shows is what the
-- nodes do (up to one refresh interval).
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

-- leader_acquire takes or renews the leader lease for a node holding a live
-- node lease under p_epoch (and not leaving), and returns the leader term it
-- holds, or NULL when another node leads. The lease is taken when it is
-- absent, expired, or held by a node whose own lease is gone (deregistered,
-- expired, or re-registered under a new epoch) or that is leaving. Times are taken into variables first
-- (Citus forbids now() inside ON CONFLICT).
-- +goose StatementBegin
CREATE FUNCTION pgsched.leader_acquire(p_node_id text, p_epoch bigint, p_ttl_seconds float8)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    t_now   timestamptz := now();
    expires timestamptz := now() + make_interval(secs => p_ttl_seconds);
    l       pgsched.leader;
    t       bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pgsched.nodes n
                   WHERE n.node_id = p_node_id AND n.epoch = p_epoch AND n.lease_expires_at > t_now AND NOT n.leaving) THEN
        RETURN NULL;
    END IF;
    SELECT * INTO l FROM pgsched.leader FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO pgsched.leader AS x (node_id, epoch, term, elected_at, renewed_at, lease_expires_at)
        VALUES (p_node_id, p_epoch, nextval('pgsched.leader_term_seq'), t_now, t_now, expires)
        ON CONFLICT (singleton) DO NOTHING
        RETURNING x.term INTO t;
        IF t IS NOT NULL THEN
            PERFORM pg_notify('pgsched.assign', '');
        END IF;
        RETURN t;
    END IF;
    IF l.node_id = p_node_id AND l.epoch = p_epoch AND l.lease_expires_at > t_now THEN
        UPDATE pgsched.leader x SET renewed_at = t_now, lease_expires_at = expires;
        RETURN l.term;
    END IF;
    IF l.lease_expires_at <= t_now OR NOT EXISTS (
        SELECT 1 FROM pgsched.nodes n
        WHERE n.node_id = l.node_id AND n.epoch = l.epoch AND n.lease_expires_at > t_now AND NOT n.leaving) THEN
        UPDATE pgsched.leader x
        SET node_id = p_node_id, epoch = p_epoch, term = nextval('pgsched.leader_term_seq'),
            elected_at = t_now, renewed_at = t_now, lease_expires_at = expires
        RETURNING x.term INTO t;
        PERFORM pg_notify('pgsched.assign', '');
        RETURN t;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- leader_resign gives the lease up (clean shutdown) so another node takes
-- over at once instead of after the TTL.
-- +goose StatementBegin
CREATE FUNCTION pgsched.leader_resign(p_node_id text, p_epoch bigint)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM pgsched.leader l WHERE l.node_id = p_node_id AND l.epoch = p_epoch;
    IF FOUND THEN
        PERFORM pg_notify('pgsched.assign', '');
    END IF;
    RETURN FOUND;
END
$$;
-- +goose StatementEnd

-- assign writes the leader's plan: the owner of each partition and the
-- backup of each member node. Only the current leader (p_node_id, p_epoch,
-- with an unexpired lease) can write; anyone else gets false and changes
-- nothing. Rows whose value is unchanged are left alone, so assigned_at
-- tells when an owner last changed.
-- +goose StatementBegin
CREATE FUNCTION pgsched.assign(
    p_node_id      text,
    p_epoch        bigint,
    partition_ids  integer[],
    owners         text[],
    backup_of      text[],
    backup_nodes   text[]
)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    t_now timestamptz := now();
    l     pgsched.leader;
BEGIN
    SELECT * INTO l FROM pgsched.leader x
    WHERE x.node_id = p_node_id AND x.epoch = p_epoch AND x.lease_expires_at > t_now
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    UPDATE pgsched.partition_owners po SET node_id = a.o, term = l.term, assigned_at = t_now
    FROM unnest(partition_ids, owners) AS a(p, o)
    WHERE po.partition_id = a.p AND po.node_id IS DISTINCT FROM a.o;
    DELETE FROM pgsched.backups b
    WHERE NOT EXISTS (SELECT 1 FROM unnest(backup_of) AS a(n) WHERE a.n = b.node_id);
    INSERT INTO pgsched.backups AS b (node_id, backup_node_id, term, assigned_at)
    SELECT a.n, a.b, l.term, t_now FROM unnest(backup_of, backup_nodes) AS a(n, b)
    ON CONFLICT (node_id) DO UPDATE
    SET backup_node_id = excluded.backup_node_id, term = excluded.term, assigned_at = excluded.assigned_at
    WHERE b.backup_node_id <> excluded.backup_node_id;
    PERFORM pg_notify('pgsched.assign', '');
    RETURN true;
END
$$;
-- +goose StatementEnd

-- deplete removes nodes whose lease ended more than p_flex_down_seconds ago:
-- their running tasks go back to their queues and their node rows are
-- deleted. Leader only (false-y: returns an empty array otherwise). Returns
-- the ids removed; the caller then reassigns their partitions.
-- +goose StatementBegin
CREATE FUNCTION pgsched.deplete(p_node_id text, p_epoch bigint, p_flex_down_seconds float8)
RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    gone text[];
BEGIN
    PERFORM 1 FROM pgsched.leader x
    WHERE x.node_id = p_node_id AND x.epoch = p_epoch AND x.lease_expires_at > now()
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN '{}';
    END IF;
    SELECT coalesce(array_agg(n.node_id ORDER BY n.node_id), '{}') INTO gone FROM pgsched.nodes n
    WHERE n.lease_expires_at < now() - make_interval(secs => p_flex_down_seconds);
    IF cardinality(gone) = 0 THEN
        RETURN gone;
    END IF;
    PERFORM pgsched.rescue_expired(gone);
    DELETE FROM pgsched.nodes n
    WHERE n.node_id = ANY (gone) AND n.lease_expires_at < now() - make_interval(secs => p_flex_down_seconds);
    RETURN gone;
END
$$;
-- +goose StatementEnd

-- stand_ins: for every member that does not serve (its lease is not live,
-- its row is gone, or it is leaving), the serving node that stands in for
-- it: its backup, or, when the backup is down too, the backup's backup, and
-- so on.
CREATE VIEW pgsched.stand_ins AS
WITH RECURSIVE down AS (
    SELECT b.node_id, b.backup_node_id FROM pgsched.backups b
    WHERE NOT EXISTS (SELECT 1 FROM pgsched.nodes n
                      WHERE n.node_id = b.node_id AND n.lease_expires_at > now() AND NOT n.leaving)
), chain (node_id, via, seen) AS (
    SELECT d.node_id, d.backup_node_id, ARRAY[d.node_id] FROM down d
    UNION ALL
    -- Follow the chain through down nodes; a chain that comes back to a
    -- node it passed is all down, and stops.
    SELECT c.node_id, d.backup_node_id, c.seen || d.node_id FROM chain c JOIN down d ON d.node_id = c.via
    WHERE d.node_id <> ALL (c.seen)
)
SELECT c.node_id, c.via AS stand_in_node_id,
       CASE WHEN dn.lease_expires_at > now() THEN NULL ELSE dn.lease_expires_at END AS down_since -- NULL: leaving, or row gone
FROM chain c
JOIN pgsched.nodes s ON s.node_id = c.via AND s.lease_expires_at > now() AND NOT s.leaving
LEFT JOIN pgsched.nodes dn ON dn.node_id = c.node_id;

-- partitions: who owns each partition and who serves it now (the owner
-- while its lease is live and it is not leaving, else its stand-in; NULL:
-- nobody).
CREATE VIEW pgsched.partitions AS
SELECT po.partition_id, po.node_id AS owner_node_id,
       coalesce(n.lease_expires_at > now(), false) AS owner_live,
       coalesce(n.leaving, false) AS owner_leaving,
       CASE WHEN n.lease_expires_at > now() AND NOT n.leaving THEN po.node_id ELSE s.stand_in_node_id END AS served_by,
       po.assigned_at, po.term
FROM pgsched.partition_owners po
LEFT JOIN pgsched.nodes n ON n.node_id = po.node_id
LEFT JOIN pgsched.stand_ins s ON s.node_id = po.node_id;

-- cluster: one row per node: its lease, whether it leads, what it owns,
-- its backup and whom it stands in for. Joins rather than correlated
-- subqueries: the planner's guesses for these tiny tables would otherwise
-- cost the view a JIT compilation on every look.
CREATE VIEW pgsched.cluster AS
WITH l AS (
    SELECT x.node_id, x.epoch FROM pgsched.leader x WHERE x.lease_expires_at > now()
), po AS (
    SELECT o.node_id, array_agg(o.partition_id ORDER BY o.partition_id) AS partitions
    FROM pgsched.partition_owners o WHERE o.node_id IS NOT NULL GROUP BY o.node_id
), si AS (
    SELECT s.stand_in_node_id, array_agg(s.node_id ORDER BY s.node_id) AS nodes
    FROM pgsched.stand_ins s GROUP BY s.stand_in_node_id
)
SELECT n.node_id, n.epoch,
       n.lease_expires_at > now() AS live,
       n.leaving,
       now() - n.renewed_at AS since_renewal,
       n.lease_expires_at, n.registered_at, n.host, n.pid,
       l.node_id IS NOT NULL AS leader,
       coalesce(po.partitions, '{}') AS partitions,
       b.backup_node_id AS backup,
       coalesce(si.nodes, '{}') AS standing_in_for
FROM pgsched.nodes n
LEFT JOIN l ON l.node_id = n.node_id AND l.epoch = n.epoch
LEFT JOIN pgsched.backups b ON b.node_id = n.node_id
LEFT JOIN po ON po.node_id = n.node_id
LEFT JOIN si ON si.stand_in_node_id = n.node_id;

-- +goose Down
DROP VIEW pgsched.cluster, pgsched.partitions, pgsched.stand_ins;
DROP FUNCTION pgsched.deplete, pgsched.assign, pgsched.leader_resign, pgsched.leader_acquire;
DROP TABLE pgsched.backups, pgsched.partition_owners, pgsched.leader;
DROP SEQUENCE pgsched.leader_term_seq;
ALTER TABLE pgsched.nodes DROP COLUMN leaving;
