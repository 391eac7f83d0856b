package main

import (
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/store"
)

// limitRow is a limited kind as JSON: a bound not set is absent.
type limitRow struct {
	Kind            string     `json:"kind"`
	MaxRunning      *int       `json:"max_running,omitempty"`
	MaxStarts       *int       `json:"max_starts,omitempty"`
	PerSeconds      *float64   `json:"per_seconds,omitempty"`
	PerGroup        bool       `json:"per_group"`
	Running         int        `json:"running"`
	StartedInWindow int        `json:"started_in_window"`
	Waiting         int64      `json:"waiting"`
	Paused          bool       `json:"paused"`
	UpdatedAt       *time.Time `json:"updated_at"`
}

func limitRows(ls []store.LimitInfo) []limitRow {
	out := make([]limitRow, len(ls))
	for i, l := range ls {
		r := limitRow{Kind: l.Kind, Running: l.Running, StartedInWindow: l.StartedInWindow, Waiting: l.Waiting,
			Paused: l.Paused, UpdatedAt: &ls[i].UpdatedAt, PerGroup: l.Limit.PerGroup}
		if l.Limit.MaxRunning != 0 {
			r.MaxRunning = &ls[i].Limit.MaxRunning
		}
		if l.Limit.MaxStarts != 0 {
			per := l.Limit.Per.Seconds()
			r.MaxStarts, r.PerSeconds = &ls[i].Limit.MaxStarts, &per
		}
		out[i] = r
	}
	return out
}

func limitsListCmd(c *cli, _ *flag.FlagSet) func([]string) error {
	return func(args []string) error {
		if err := wantArgs("limits list", args, 0, ""); err != nil {
			return err
		}
		var ls []store.LimitInfo
		err := c.read(func(tx pgx.Tx) error {
			var err error
			ls, err = c.store.Limits(c.ctx, tx)
			return err
		})
		if err != nil {
			return err
		}
		rows := limitRows(ls)
		if c.json {
			return writeJSON(c.stdout, rows)
		}
		t := newTable(c.stdout, "KIND", "MAX RUNNING", "RUNNING", "MAX STARTS", "STARTED", "WAITING", "PAUSED")
		for _, r := range rows {
			maxRunning, maxStarts, started := "-", "-", "-"
			if r.MaxRunning != nil {
				maxRunning = fmt.Sprint(*r.MaxRunning)
				if r.PerGroup {
					maxRunning += " per group"
				}
			}
			if r.MaxStarts != nil {
				maxStarts = fmt.Sprintf("%d per %s", *r.MaxStarts, time.Duration(*r.PerSeconds*float64(time.Second)))
				if r.PerGroup {
					maxStarts += " per group"
				}
				started = fmt.Sprint(r.StartedInWindow)
			}
			paused := "no"
			if r.Paused {
				paused = "yes"
			}
			t.row(text(r.Kind), maxRunning, fmt.Sprint(r.Running), maxStarts, started, fmt.Sprint(r.Waiting), paused)
		}
		return t.flush()
	}
}

func limitsSetCmd(c *cli, fs *flag.FlagSet) func([]string) error {
	var l pgsched.Limit
	fs.IntVar(&l.MaxRunning, "max-running", 0, "at most this many of the kind's tasks running at once, cluster-wide")
	fs.IntVar(&l.MaxStarts, "max-starts", 0, "at most this many started in any window of -per")
	fs.DurationVar(&l.Per, "per", 0, "the window of -max-starts (1s, 1m, up to 24h)")
	fs.BoolVar(&l.PerGroup, "per-group", false, "-max-running and -max-starts bound each group (group_key) of the kind apart")
	return func(args []string) error {
		if err := wantArgs("limits set", args, 1, "one kind"); err != nil {
			return err
		}
		if err := c.open(); err != nil {
			return err
		}
		fresh, err := c.client.SetLimit(c.ctx, args[0], l)
		if err != nil {
			return err
		}
		if c.json {
			return writeJSON(c.stdout, map[string]any{"kind": args[0], "new": fresh})
		}
		did := "changed the limit of"
		if fresh {
			did = "limited"
		}
		_, err = fmt.Fprintf(c.stdout, "%s kind %s\n", did, text(args[0]))
		return err
	}
}

func limitsClearCmd(c *cli, _ *flag.FlagSet) func([]string) error {
	return func(args []string) error {
		if err := wantArgs("limits clear", args, 1, "one kind"); err != nil {
			return err
		}
		if err := c.open(); err != nil {
			return err
		}
		was, err := c.client.ClearLimit(c.ctx, args[0])
		if err != nil {
			return err
		}
		if c.json {
			return writeJSON(c.stdout, map[string]any{"kind": args[0], "changed": was})
		}
		msg := "cleared the limit of kind %s\n"
		if !was {
			msg = "kind %s had no limit\n"
		}
		_, err = fmt.Fprintf(c.stdout, msg, text(args[0]))
		return err
	}
}

func limitsWeightCmd(c *cli, _ *flag.FlagSet) func([]string) error {
	return func(args []string) error {
		if err := wantArgs("limits weight", args, 3, "a kind, a group (\"\" for tasks without one) and a weight"); err != nil {
			return err
		}
		weight, err := strconv.Atoi(args[2])
		if err != nil {
			return usagef("limits weight: the weight must be a whole number from 1 to %d, got %q", pgsched.MaxGroupWeight, args[2])
		}
		if err := c.open(); err != nil {
			return err
		}
		was, err := c.client.SetGroupWeight(c.ctx, args[0], args[1], weight)
		if err != nil {
			return err
		}
		if c.json {
			return writeJSON(c.stdout, map[string]any{"kind": args[0], "group_key": args[1], "weight": weight, "previous": was})
		}
		_, err = fmt.Fprintf(c.stdout, "group %s of kind %s: weight %d (was %d)\n", text(args[1]), text(args[0]), weight, was)
		return err
	}
}

func limitsWeightsCmd(c *cli, _ *flag.FlagSet) func([]string) error {
	return func(args []string) error {
		if err := wantArgs("limits weights", args, 0, ""); err != nil {
			return err
		}
		var ws []store.GroupWeight
		err := c.read(func(tx pgx.Tx) error {
			var err error
			ws, err = c.store.GroupWeights(c.ctx, tx)
			return err
		})
		if err != nil {
			return err
		}
		if c.json {
			type row struct {
				Kind      string    `json:"kind"`
				GroupKey  string    `json:"group_key"`
				Weight    int       `json:"weight"`
				Limited   bool      `json:"limited"`
				UpdatedAt time.Time `json:"updated_at"`
			}
			rows := make([]row, len(ws))
			for i, w := range ws {
				rows[i] = row(w)
			}
			return writeJSON(c.stdout, rows)
		}
		t := newTable(c.stdout, "KIND", "GROUP", "WEIGHT", "LIMITED")
		for _, w := range ws {
			limited := "no"
			if w.Limited {
				limited = "yes"
			}
			t.row(text(w.Kind), text(w.GroupKey), fmt.Sprint(w.Weight), limited)
		}
		return t.flush()
	}
}
