-- heads' table partitions leave three fifths of each page free, not a
-- quarter. A claim updates every head it takes in one transaction, and a
-- burn-down claims heads in the order they were written, so a claim
-- rewrites most heads of each page it touches, each version a little
-- longer than the last (node_id, epoch and claimed_at were NULL). An update
-- is a HOT update (no index touched) only while the new version fits on
-- its page, and the versions a claim replaces are not free until it
-- commits: with a quarter free, two heads in three left the page, each
-- inserting into heads_pkey and heads_due, which then grow bloated and
-- pay for bottom-up deletion. With three fifths free every claimed head
-- fits beside its old version (docs/design.md, "Claims are HOT updates").
-- Only pages written from now on are filled this way; heads turn over.

-- +goose Up
-- +goose StatementBegin
DO $$
DECLARE
    part regclass;
BEGIN
    FOR part IN SELECT i.inhrelid::regclass FROM pg_inherits i WHERE i.inhparent = 'pgsched.heads'::regclass LOOP
        EXECUTE format('ALTER TABLE %s SET (fillfactor = 40)', part);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE
    part regclass;
BEGIN
    FOR part IN SELECT i.inhrelid::regclass FROM pg_inherits i WHERE i.inhparent = 'pgsched.heads'::regclass LOOP
        EXECUTE format('ALTER TABLE %s SET (fillfactor = 75)', part);
    END LOOP;
END
$$;
-- +goose StatementEnd
