-- configure changes the installation's settings; each argument left NULL
-- keeps its value. grace: how far in the past a scheduled time is still
-- accepted; completion_retention: how long tombstones of completed keys
-- are kept (whole days of completions are dropped once older than it);
-- max_payload_bytes: the largest payload, as stored jsonb. Refused, with
-- nothing changed (SQLSTATE PGS01), when the retention would not outlive
-- the grace window by more than a second: a key whose tombstone is gone
-- while it can still be enqueued would run again. Returns the settings as
-- they now are.
CREATE OR REPLACE FUNCTION pgsched.configure(grace interval DEFAULT NULL, completion_retention interval DEFAULT NULL,
                                             max_payload_bytes integer DEFAULT NULL)
RETURNS pgsched.settings
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
DECLARE
    s pgsched.settings;
BEGIN
    SELECT * INTO s FROM pgsched.settings FOR UPDATE;
    s.grace := coalesce(grace, s.grace);
    s.completion_retention := coalesce(completion_retention, s.completion_retention);
    s.max_payload_bytes := coalesce(max_payload_bytes, s.max_payload_bytes);
    IF s.grace < interval '0' THEN
        RAISE EXCEPTION 'pgsched: grace must not be negative, got %', s.grace USING ERRCODE = 'PGS01';
    END IF;
    IF s.completion_retention <= s.grace + interval '1 second' THEN
        RAISE EXCEPTION 'pgsched: completion_retention % must be longer than grace % plus 1 second: a completed key could be enqueued again after its tombstone is dropped, and run twice',
            s.completion_retention, s.grace USING ERRCODE = 'PGS01';
    END IF;
    IF s.max_payload_bytes <= 0 THEN
        RAISE EXCEPTION 'pgsched: max_payload_bytes must be positive, got %', s.max_payload_bytes USING ERRCODE = 'PGS01';
    END IF;
    UPDATE pgsched.settings x
    SET grace = s.grace, completion_retention = s.completion_retention, max_payload_bytes = s.max_payload_bytes;
    RETURN s;
END
$$;
