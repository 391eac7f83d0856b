-- set_group_weight gives a group (group_key; '' for tasks without one) of
-- a kind a weight in the kind's fair share: while the kind's limit holds
-- tasks back, each round of its groups gives this group weight turns and
-- every group without a weight one. Weight 1 removes the row (the
-- default). It takes effect at the kind's next claim, needs no limit to be
-- set first, and outlives clear_limit. PGS01 for a bad argument. Returns
-- the weight the group had before.
CREATE OR REPLACE FUNCTION pgsched.set_group_weight(kind text, group_key text, weight integer)
RETURNS integer
LANGUAGE plpgsql
SET jit = off
AS $$
DECLARE
    was integer;
    err text := CASE
        WHEN kind IS NULL OR kind = '' THEN 'pgsched: kind is required'
        WHEN octet_length(kind) > 255 THEN format('pgsched: kind is %s bytes, over the limit of 255', octet_length(kind))
        WHEN kind ~ '[\x01-\x1f\x7f]' THEN 'pgsched: kind contains a control character'
        WHEN group_key IS NULL THEN 'pgsched: group_key is required ('''' for tasks without one)'
        WHEN group_key ~ '[\x01-\x1f\x7f]' THEN 'pgsched: group_key contains a control character'
        WHEN octet_length(group_key) > 255 THEN format('pgsched: group_key is %s bytes, over the limit of 255', octet_length(group_key))
        WHEN weight IS NULL OR weight < 1 OR weight > 1000 THEN format('pgsched: weight must be from 1 to 1000, got %s', coalesce(weight::text, 'null'))
    END;
BEGIN
    IF err IS NOT NULL THEN
        RAISE EXCEPTION USING MESSAGE = err, ERRCODE = 'PGS01';
    END IF;
    SELECT w.weight INTO was FROM pgsched.limit_group_weights w
    WHERE w.kind = set_group_weight.kind AND w.group_key = set_group_weight.group_key FOR UPDATE;
    IF set_group_weight.weight = 1 THEN
        DELETE FROM pgsched.limit_group_weights w WHERE w.kind = set_group_weight.kind AND w.group_key = set_group_weight.group_key;
    ELSE
        INSERT INTO pgsched.limit_group_weights AS w (kind, group_key, weight)
        VALUES (set_group_weight.kind, set_group_weight.group_key, set_group_weight.weight)
        ON CONFLICT ON CONSTRAINT limit_group_weights_pkey DO UPDATE SET weight = excluded.weight, updated_at = excluded.updated_at;
    END IF;
    RETURN coalesce(was, 1);
END
$$;
