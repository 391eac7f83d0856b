-- count_kinds replaces pgsched.kind_counts with a fresh count of every
-- task per kind: pending (heads not running and the backlog), of those the
-- due ones and when the oldest of those was due, running, and dead, all
-- from one snapshot. It reads every task,
-- so the leader calls it every few seconds, and less often when it takes
-- long; pages and metrics read the result. Returns the number of kinds,
-- or -1 when another count is running (this one then does nothing).
CREATE OR REPLACE FUNCTION pgsched.count_kinds()
RETURNS integer
LANGUAGE plpgsql
SET jit = off
AS $$
DECLARE
    began timestamptz := clock_timestamp();
    n     integer;
BEGIN
    -- One count at a time: a new leader skips while the last one's count
    -- is still running.
    IF NOT pg_try_advisory_xact_lock(hashtext('pgsched.kind_counts')) THEN
        RETURN -1;
    END IF;
    DELETE FROM pgsched.kind_counts;
    INSERT INTO pgsched.kind_counts (kind, pending, due, running, dead, oldest_due_at, held)
    SELECT c.kind, sum(c.pending), sum(c.due), sum(c.running), sum(c.dead), min(c.oldest_due_at), sum(c.held)
    FROM (
        SELECT h.kind, count(*) FILTER (WHERE NOT h.running) AS pending,
               count(*) FILTER (WHERE NOT h.running AND h.run_at <= now()) AS due,
               count(*) FILTER (WHERE h.running) AS running, 0::bigint AS dead,
               min(h.run_at) FILTER (WHERE NOT h.running AND h.run_at <= now()) AS oldest_due_at,
               count(*) FILTER (WHERE NOT h.running AND h.chain = -1) AS held
        FROM pgsched.heads h GROUP BY h.kind
        UNION ALL
        SELECT b.kind, count(*), count(*) FILTER (WHERE b.run_at <= now()), 0, 0,
               min(b.run_at) FILTER (WHERE b.run_at <= now()), 0
        FROM pgsched.backlog b GROUP BY b.kind
        UNION ALL
        SELECT d.kind, 0, 0, 0, count(*), NULL, 0
        FROM pgsched.dead_tasks d GROUP BY d.kind
    ) c
    GROUP BY c.kind;
    GET DIAGNOSTICS n = ROW_COUNT;
    INSERT INTO pgsched.kind_counted (one, counted_at, took) VALUES (true, now(), clock_timestamp() - began)
    ON CONFLICT (one) DO UPDATE SET counted_at = excluded.counted_at, took = excluded.took;
    RETURN n;
END
$$;
