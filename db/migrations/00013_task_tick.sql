-- A recurring schedule's tick is marked as one: tick is true on the tasks
-- recurring_materialize creates, and stays with the task as it moves
-- (backlog to head, head to completion or dead_tasks). What reads ticks
-- (the recurring view, dropping a changed schedule's future ticks, the
-- tick lateness metric) asks this column, not the shape of the key, so a
-- task a user enqueues under a schedule's name is never taken for a tick.
--
-- Existing pending and dead ticks are marked by their key; completions
-- are not rewritten (a schedule's last result shows again from its next
-- tick on).

-- +goose Up
ALTER TABLE pgsched.heads ADD COLUMN tick boolean NOT NULL DEFAULT false;
ALTER TABLE pgsched.backlog ADD COLUMN tick boolean NOT NULL DEFAULT false;
ALTER TABLE pgsched.completions ADD COLUMN tick boolean NOT NULL DEFAULT false;
ALTER TABLE pgsched.dead_tasks ADD COLUMN tick boolean NOT NULL DEFAULT false;

UPDATE pgsched.heads h SET tick = true
WHERE h.uniqueness_key LIKE 'tick %' AND EXISTS (SELECT 1 FROM pgsched.recurring_schedules r WHERE r.name = h.ordering_id);
UPDATE pgsched.backlog b SET tick = true
WHERE b.uniqueness_key LIKE 'tick %' AND EXISTS (SELECT 1 FROM pgsched.recurring_schedules r WHERE r.name = b.ordering_id);
UPDATE pgsched.dead_tasks d SET tick = true
WHERE d.uniqueness_key LIKE 'tick %' AND EXISTS (SELECT 1 FROM pgsched.recurring_schedules r WHERE r.name = d.ordering_id);

-- +goose Down
ALTER TABLE pgsched.dead_tasks DROP COLUMN tick;
ALTER TABLE pgsched.completions DROP COLUMN tick;
ALTER TABLE pgsched.backlog DROP COLUMN tick;
ALTER TABLE pgsched.heads DROP COLUMN tick;
