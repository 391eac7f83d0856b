-- For sqlc only: the schema the SQL under db/ is written against. The
-- migrator creates the real one, under whatever name was chosen, before
-- the migrations run.
CREATE SCHEMA pgsched;
