-- An operator cancels a running task (pgsched.cancel_running): the request
-- is a row, so the node running the task sees it whether it hears the
-- NOTIFY or reads the table at its next maintenance round, and a node that
-- picks the task up after its first node died sees it too.

-- +goose Up
CREATE TABLE pgsched.cancel_requests (
    task_id      bigint      PRIMARY KEY,
    partition_id integer     NOT NULL,
    ordering_id  text COLLATE "C" NOT NULL,
    requested_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE pgsched.cancel_requests;
