-- A handler may leave a small JSON result behind (Job.RecordOutput); it is
-- kept with the task's completion record, for as long as the completion
-- is (the retention window), and read by key (pgsched.task_output).

-- +goose Up
ALTER TABLE pgsched.completions ADD COLUMN output jsonb;

-- +goose Down
ALTER TABLE pgsched.completions DROP COLUMN output;
