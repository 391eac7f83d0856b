-- Operators retry or delete a dead task by its id (pgsched.retry_dead,
-- delete_dead); the primary key leads with the partition, so the id needs
-- an index of its own to be one probe among millions of dead tasks.

-- +goose Up
CREATE INDEX dead_tasks_id ON pgsched.dead_tasks (id);

-- +goose Down
DROP INDEX pgsched.dead_tasks_id;
