-- retry_dead puts one dead task back in line (see retry_dead_ids) and
-- returns 1, or 0 when there is no dead task with that id.
CREATE OR REPLACE FUNCTION pgsched.retry_dead(id bigint)
RETURNS integer
LANGUAGE sql AS $$ SELECT pgsched.retry_dead_ids(ARRAY[id]) $$;
