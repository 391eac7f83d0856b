package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsched/pgsched/internal/store"
)

// task is a task as tasks and dead print it in JSON: pending or running
// (with run_at) or dead (with died_at).
type task struct {
	ID            int64           `json:"id"`
	State         string          `json:"state"`
	OrderingID    string          `json:"ordering_id"`
	ScheduledAt   time.Time       `json:"scheduled_at"`
	UniquenessKey string          `json:"uniqueness_key"`
	Kind          string          `json:"kind"`
	RunAt         *time.Time      `json:"run_at,omitempty"`
	DiedAt        *time.Time      `json:"died_at,omitempty"`
	Attempt       int             `json:"attempt"`
	LastError     string          `json:"last_error"`
	NodeID        string          `json:"node_id"`
	PartitionID   *int32          `json:"partition_id,omitempty"`
	Priority      int32           `json:"priority"`
	GroupKey      string          `json:"group_key,omitempty"`
	Payload       json.RawMessage `json:"payload"`
}

const (
	defaultLimit = 100
	maxLimit     = 10000
)

// limitFlag defines -limit.
func limitFlag(fs *flag.FlagSet) *int {
	return fs.Int("limit", defaultLimit, fmt.Sprintf("list at most this many; 1..%d", maxLimit))
}

func checkLimit(n int) error {
	if n < 1 || n > maxLimit {
		return usagef("-limit must be between 1 and %d, got %d", maxLimit, n)
	}
	return nil
}

func tasksListCmd(c *cli, fs *flag.FlagSet) func([]string) error {
	kind := fs.String("kind", "", "only tasks of this kind")
	state := fs.String("state", "", "only pending or only running tasks")
	orderingID := fs.String("ordering-id", "", "only this ordering_id's tasks, in the order they run")
	limit := limitFlag(fs)
	return func(args []string) error {
		if err := wantArgs("tasks list", args, 0, ""); err != nil {
			return err
		}
		if *state != "" && *state != "pending" && *state != "running" {
			return usagef("-state must be pending or running, got %q", *state)
		}
		if err := checkLimit(*limit); err != nil {
			return err
		}
		var rows []store.Listed
		err := c.read(func(tx pgx.Tx) error {
			var err error
			rows, err = c.store.CLITasks(c.ctx, tx, *kind, *state, *orderingID, *limit)
			return err
		})
		if err != nil {
			return err
		}
		tasks := make([]task, len(rows))
		for i, r := range rows {
			tasks[i] = task{ID: r.ID, State: r.State, OrderingID: r.OrderingID, ScheduledAt: r.ScheduledAt.UTC(),
				UniquenessKey: r.UniquenessKey, Kind: r.Kind, RunAt: timePtr(r.RunAt), Attempt: r.Attempt,
				LastError: r.LastError, NodeID: r.NodeID, Priority: r.Priority, GroupKey: r.GroupKey, Payload: payload(r.Payload)}
		}
		if c.json {
			return writeJSON(c.stdout, tasks)
		}
		t := newTable(c.stdout, "ID", "STATE", "ORDERING_ID", "SCHEDULED_AT", "UNIQUENESS_KEY", "KIND", "RUN_AT", "ATTEMPT", "NODE", "LAST_ERROR")
		for _, k := range tasks {
			t.row(fmt.Sprint(k.ID), k.State, text(k.OrderingID), timeText(k.ScheduledAt), text(k.UniquenessKey), text(k.Kind),
				timeAt(k.RunAt), fmt.Sprint(k.Attempt), optional(k.NodeID), short(k.LastError, 60))
		}
		return t.flush()
	}
}

func tasksShowCmd(c *cli, fs *flag.FlagSet) func([]string) error {
	orderingID := fs.String("ordering-id", "", "only this ordering_id's tasks (reads its partition by key instead of every task)")
	return func(args []string) error {
		if err := wantArgs("tasks show", args, 1, "one task id or uniqueness key"); err != nil {
			return err
		}
		id, idErr := strconv.ParseInt(args[0], 10, 64)
		var rows []store.CLIFound
		err := c.read(func(tx pgx.Tx) error {
			var err error
			rows, err = c.store.CLITaskFind(c.ctx, tx, id, idErr == nil, args[0], *orderingID)
			return err
		})
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return notFoundf("no pending, running or dead task has the id or uniqueness key %s (completed tasks are not kept to show)",
				strconv.Quote(args[0]))
		}
		tasks := make([]task, len(rows))
		for i, r := range rows {
			tasks[i] = task{ID: r.ID, State: r.State, OrderingID: r.OrderingID, ScheduledAt: r.ScheduledAt.UTC(),
				UniquenessKey: r.UniquenessKey, Kind: r.Kind, Attempt: int(r.Attempt), LastError: r.LastError,
				NodeID: r.NodeID, PartitionID: &r.PartitionID, Priority: r.Priority, GroupKey: r.GroupKey, Payload: payload(r.Payload)}
			if r.State == "dead" {
				tasks[i].DiedAt = timePtr(r.At)
			} else {
				tasks[i].RunAt = timePtr(r.At)
			}
		}
		if c.json {
			return writeJSON(c.stdout, tasks)
		}
		return printTasks(c, tasks)
	}
}

// printTasks prints tasks whole, one field a line, a blank line between
// two.
func printTasks(c *cli, tasks []task) error {
	for i, k := range tasks {
		if i > 0 {
			fmt.Fprintln(c.stdout)
		}
		t := newTable(c.stdout, "state", k.State)
		t.row("id", fmt.Sprint(k.ID))
		t.row("ordering_id", text(k.OrderingID))
		t.row("scheduled_at", timeText(k.ScheduledAt))
		t.row("uniqueness_key", text(k.UniquenessKey))
		t.row("kind", text(k.Kind))
		t.row("priority", fmt.Sprint(k.Priority))
		if k.GroupKey != "" {
			t.row("group_key", text(k.GroupKey))
		}
		if k.DiedAt != nil {
			t.row("died_at", timeAt(k.DiedAt))
		} else {
			t.row("run_at", timeAt(k.RunAt))
		}
		t.row("attempt", fmt.Sprint(k.Attempt))
		t.row("node_id", optional(k.NodeID))
		if k.PartitionID != nil {
			t.row("partition", fmt.Sprint(*k.PartitionID))
		}
		t.row("last_error", optional(k.LastError))
		t.row("payload", string(k.Payload))
		if err := t.flush(); err != nil {
			return err
		}
	}
	return nil
}

func tasksOutputCmd(c *cli, fs *flag.FlagSet) func([]string) error {
	at := fs.String("scheduled-at", "", "the task's scheduled_at, RFC 3339 (required)")
	uniquenessKey := fs.String("uniqueness-key", "", "the task's uniqueness_key")
	return func(args []string) error {
		if err := wantArgs("tasks output", args, 1, "the task's ordering_id"); err != nil {
			return err
		}
		scheduledAt, err := time.Parse(time.RFC3339Nano, *at)
		if err != nil {
			return usagef("-scheduled-at must be an RFC 3339 time (2026-11-26T09:00:00Z), got %q", *at)
		}
		var out []byte
		err = c.read(func(tx pgx.Tx) error {
			var err error
			out, err = c.store.TaskOutput(c.ctx, tx, args[0], scheduledAt, *uniquenessKey)
			return err
		})
		if err != nil {
			return err
		}
		if out == nil {
			return notFoundf("no output: the task %s at %s completed without one, or no completion of it is remembered",
				strconv.Quote(args[0]), timeText(scheduledAt))
		}
		return writeJSON(c.stdout, json.RawMessage(out))
	}
}
