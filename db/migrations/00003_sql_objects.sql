-- What the migrator last applied of db/functions and db/views: a checksum
-- of the files as rewritten for this schema. A worker starting with the
-- same files finds it equal and changes nothing; a new version applies
-- its functions and views once, in one transaction (see internal/migrator).

-- +goose Up
CREATE TABLE pgsched.sql_objects (
    singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE pgsched.sql_objects;
