-- A task remembers the trace of the call that enqueued it: traceparent is
-- the W3C trace context (00-<trace id>-<span id>-<flags>) a client with a
-- Tracer, or a schedule/schedule_many call with a traceparent argument,
-- passed in, and stays with the task as it moves (backlog to head, head to
-- dead_tasks), so the handler's run span links back to it (pgschedotel,
-- docs/tracing.md). NULL, as for every task enqueued without one, costs
-- no more than a bit in the row's null bitmap.
--
-- Completions do not keep it: a completed task's trace ends with its run.
-- Numbered 00017, leaving 00016 to the change being made beside this one.

-- +goose Up
ALTER TABLE pgsched.heads ADD COLUMN traceparent text;
ALTER TABLE pgsched.backlog ADD COLUMN traceparent text;
ALTER TABLE pgsched.dead_tasks ADD COLUMN traceparent text;

-- +goose Down
ALTER TABLE pgsched.dead_tasks DROP COLUMN traceparent;
ALTER TABLE pgsched.backlog DROP COLUMN traceparent;
ALTER TABLE pgsched.heads DROP COLUMN traceparent;
