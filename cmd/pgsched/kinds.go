package main

import (
	"flag"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgsched/pgsched/internal/store"
)

func kindsListCmd(c *cli, _ *flag.FlagSet) func([]string) error {
	return func(args []string) error {
		if err := wantArgs("kinds list", args, 0, ""); err != nil {
			return err
		}
		var rows []store.CLIKind
		err := c.read(func(tx pgx.Tx) error {
			var err error
			rows, err = c.store.CLIKinds(c.ctx, tx)
			return err
		})
		if err != nil {
			return err
		}
		kinds := counts(rows)
		if c.json {
			return writeJSON(c.stdout, kinds)
		}
		return printKinds(c, kinds, false)
	}
}

// switched is what pausing or resuming a kind or a schedule did, as JSON.
type switched struct {
	Kind    string `json:"kind,omitempty"`
	Name    string `json:"name,omitempty"`
	Paused  bool   `json:"paused"`
	Changed bool   `json:"changed"` // false: it was so already
}

func (s switched) print(c *cli, what, name, did, already string) error {
	if c.json {
		return writeJSON(c.stdout, s)
	}
	if s.Changed {
		_, err := fmt.Fprintf(c.stdout, "%s %s %s\n", did, what, text(name))
		return err
	}
	_, err := fmt.Fprintf(c.stdout, "%s %s was %s already\n", what, text(name), already)
	return err
}

func kindsPauseCmd(c *cli, _ *flag.FlagSet) func([]string) error {
	return func(args []string) error {
		if err := wantArgs("kinds pause", args, 1, "one kind"); err != nil {
			return err
		}
		if err := c.open(); err != nil {
			return err
		}
		changed, err := c.client.PauseKind(c.ctx, args[0])
		if err != nil {
			return err
		}
		return switched{Kind: args[0], Paused: true, Changed: changed}.print(c, "kind", args[0], "paused", "paused")
	}
}

func kindsResumeCmd(c *cli, _ *flag.FlagSet) func([]string) error {
	return func(args []string) error {
		if err := wantArgs("kinds resume", args, 1, "one kind"); err != nil {
			return err
		}
		if err := c.open(); err != nil {
			return err
		}
		changed, err := c.client.ResumeKind(c.ctx, args[0])
		if err != nil {
			return err
		}
		return switched{Kind: args[0], Paused: false, Changed: changed}.print(c, "kind", args[0], "resumed", "not paused")
	}
}
