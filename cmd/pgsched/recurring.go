package main

import (
	"encoding/json"
	"errors"
	"flag"
	"time"

	"github.com/pgsched/pgsched"
)

// recurringJSON is a recurring schedule as recurring list prints it.
type recurringJSON struct {
	Name         string          `json:"name"`
	Spec         string          `json:"spec"`
	TimeZone     string          `json:"time_zone"`
	Kind         string          `json:"kind"`
	Missed       string          `json:"missed"`
	Paused       bool            `json:"paused"`
	NextRunAt    *time.Time      `json:"next_run_at"`
	LastRunAt    *time.Time      `json:"last_run_at"`
	LastResult   string          `json:"last_result"`
	FailingSince *time.Time      `json:"failing_since"`
	Error        string          `json:"error"`
	Payload      json.RawMessage `json:"payload"`
}

func recurringListCmd(c *cli, _ *flag.FlagSet) func([]string) error {
	return func(args []string) error {
		if err := wantArgs("recurring list", args, 0, ""); err != nil {
			return err
		}
		if err := c.open(); err != nil {
			return err
		}
		rows, err := c.client.ListRecurring(c.ctx)
		if err != nil {
			return err
		}
		list := make([]recurringJSON, len(rows))
		for i, r := range rows {
			list[i] = recurringJSON{Name: r.Name, Spec: r.Spec, TimeZone: r.TimeZone, Kind: r.Kind, Missed: r.Missed,
				Paused: r.Paused, NextRunAt: timePtr(r.NextRunAt), LastRunAt: timePtr(r.LastRunAt), LastResult: r.LastResult,
				FailingSince: timePtr(r.FailingSince), Error: r.Error, Payload: payload(r.Payload)}
		}
		if c.json {
			return writeJSON(c.stdout, list)
		}
		t := newTable(c.stdout, "NAME", "SPEC", "TIME_ZONE", "KIND", "MISSED", "PAUSED", "NEXT_RUN_AT", "LAST_RUN_AT", "LAST_RESULT", "ERROR")
		for _, r := range list {
			problem := short(r.Error, 60)
			if r.FailingSince != nil {
				problem = "set aside since " + timeAt(r.FailingSince) + ": " + problem
			}
			t.row(text(r.Name), text(r.Spec), text(r.TimeZone), text(r.Kind), text(r.Missed), yesNo(r.Paused), timeAt(r.NextRunAt), timeAt(r.LastRunAt),
				optional(r.LastResult), problem)
		}
		return t.flush()
	}
}

// recurringSwitch pauses or resumes a schedule; one that does not exist is
// "not found".
func recurringSwitch(c *cli, cmd string, pause bool) func([]string) error {
	return func(args []string) error {
		if err := wantArgs(cmd, args, 1, "one schedule name"); err != nil {
			return err
		}
		if err := c.open(); err != nil {
			return err
		}
		name := args[0]
		f, did, already := c.client.ResumeRecurring, "resumed", "not paused"
		if pause {
			f, did, already = c.client.PauseRecurring, "paused", "paused"
		}
		changed, err := f(c.ctx, name)
		if errors.Is(err, pgsched.ErrNotFound) {
			return notFoundf("no recurring schedule is named %s", text(name))
		}
		if err != nil {
			return err
		}
		return switched{Name: name, Paused: pause, Changed: changed}.print(c, "recurring schedule", name, did, already)
	}
}

func recurringPauseCmd(c *cli, _ *flag.FlagSet) func([]string) error {
	return recurringSwitch(c, "recurring pause", true)
}

func recurringResumeCmd(c *cli, _ *flag.FlagSet) func([]string) error {
	return recurringSwitch(c, "recurring resume", false)
}
