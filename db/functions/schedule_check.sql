-- schedule_check refuses a batch that schedule_many must not store: arrays
-- of different lengths, or a task with an invalid field (SQLSTATE PGS01)
-- or a time before the grace window (PGS02), naming the first such task's
-- field and, in a batch, its position. A traceparent is NULL or '' (none)
-- or a W3C trace context of version 00 with non-zero ids, lowercase hex.
-- A group_key is NULL or '' (none) or, as a kind, at most 255 bytes
-- without control characters. Every integer is a priority.
CREATE OR REPLACE FUNCTION pgsched.schedule_check(ordering_ids text[], scheduled_ats timestamptz[], uniqueness_keys text[],
                                                  payloads jsonb[], kinds text[], s pgsched.settings, t_now timestamptz,
                                                  traceparents text[] DEFAULT NULL, priorities integer[] DEFAULT NULL,
                                                  group_keys text[] DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    n      integer := coalesce(cardinality(ordering_ids), 0);
    bad    record;
    where_ text := '';
BEGIN
    IF coalesce(cardinality(scheduled_ats), 0) <> n
       OR (uniqueness_keys IS NOT NULL AND cardinality(uniqueness_keys) <> n)
       OR (payloads IS NOT NULL AND cardinality(payloads) <> n)
       OR (kinds IS NOT NULL AND cardinality(kinds) <> n)
       OR (traceparents IS NOT NULL AND cardinality(traceparents) <> n)
       OR (priorities IS NOT NULL AND cardinality(priorities) <> n)
       OR (group_keys IS NOT NULL AND cardinality(group_keys) <> n) THEN
        RAISE EXCEPTION 'pgsched: schedule_many arrays must all have % elements', n USING ERRCODE = 'PGS01';
    END IF;
    -- Arrays are only ever unnested together: subscripting a large array of
    -- variable-width values costs O(i) per access.
    --
    -- The checks and their costs: docs/design.md, "schedule_many".
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
                WHEN u.tp <> '' AND (u.tp !~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$' OR u.tp ~ '^00-0{32}-' OR u.tp ~ '-0{16}-..$')
                    THEN 'traceparent is not a W3C trace context: want 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>, lowercase, ids not all zero'
                WHEN u.gk ~ '[\x01-\x1f\x7f]' THEN 'group_key contains a control character'
                WHEN octet_length(u.gk) > 255 THEN format('group_key is %s bytes, over the limit of 255', octet_length(u.gk))
            END AS invalid,
            CASE WHEN u.sa < t_now - s.grace
                THEN format('scheduled_at %s is before now minus the grace window of %s', u.sa, s.grace)
            END AS past
        FROM unnest(ordering_ids, scheduled_ats, uniqueness_keys, payloads, kinds, traceparents, group_keys)
             WITH ORDINALITY AS u(o, sa, uk, pl, k, tp, gk, i)
    ) x WHERE x.invalid IS NOT NULL OR x.past IS NOT NULL ORDER BY x.i LIMIT 1;
    IF FOUND THEN
        IF n > 1 THEN
            where_ := format(' (batch item %s)', bad.i);
        END IF;
        IF bad.code = 'PGS02' AND scheduled_ats[bad.i::integer] = '0001-01-01 00:00:00+00' THEN
            -- Go's zero time: the caller never set scheduled_at.
            RAISE EXCEPTION USING MESSAGE = 'pgsched: ' || pgsched.time_error('scheduled_at', scheduled_ats[bad.i::integer]) || where_,
                ERRCODE = 'PGS01';
        END IF;
        RAISE EXCEPTION USING MESSAGE = 'pgsched: ' || bad.msg || where_, ERRCODE = bad.code;
    END IF;
END
$$;
