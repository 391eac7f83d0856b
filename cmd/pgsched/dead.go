package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/store"
)

// deadFilter is the flags that select dead tasks, as pgsched.dead_ids
// selects them: every one given must match.
type deadFilter struct {
	kind, orderingID, after, before string
}

func deadFilterFlags(fs *flag.FlagSet) *deadFilter {
	f := &deadFilter{}
	fs.StringVar(&f.kind, "kind", "", "only dead tasks of this kind")
	fs.StringVar(&f.orderingID, "ordering-id", "", "only this ordering_id's dead tasks")
	fs.StringVar(&f.after, "died-after", "", "only those that died at or after this `time`: RFC 3339, or a duration meaning that long ago (1h)")
	fs.StringVar(&f.before, "died-before", "", "only those that died before this `time`: RFC 3339, or a duration meaning that long ago (1h)")
	return f
}

func (f *deadFilter) empty() bool { return *f == deadFilter{} }

// filter converts the flags, reading a duration as that long before now.
func (f *deadFilter) filter(now time.Time) (pgsched.DeadFilter, error) {
	out := pgsched.DeadFilter{Kind: f.kind, OrderingID: f.orderingID}
	for _, w := range []struct {
		flag, v string
		to      *time.Time
	}{{"died-after", f.after, &out.DiedAfter}, {"died-before", f.before, &out.DiedBefore}} {
		if w.v == "" {
			continue
		}
		if t, err := time.Parse(time.RFC3339Nano, w.v); err == nil {
			*w.to = t
		} else if d, err := time.ParseDuration(w.v); err == nil && d >= 0 {
			*w.to = now.Add(-d)
		} else {
			return out, usagef("-%s must be an RFC 3339 time (2006-01-02T15:04:05Z) or a duration (1h), got %q", w.flag, w.v)
		}
	}
	return out, nil
}

func deadListCmd(c *cli, fs *flag.FlagSet) func([]string) error {
	f := deadFilterFlags(fs)
	limit := limitFlag(fs)
	return func(args []string) error {
		if err := wantArgs("dead list", args, 0, ""); err != nil {
			return err
		}
		if err := checkLimit(*limit); err != nil {
			return err
		}
		filter, err := f.filter(time.Now())
		if err != nil {
			return err
		}
		tasks, err := c.dead(0, filter, *limit)
		if err != nil {
			return err
		}
		if c.json {
			return writeJSON(c.stdout, tasks)
		}
		t := newTable(c.stdout, "ID", "DIED_AT", "KIND", "ORDERING_ID", "SCHEDULED_AT", "UNIQUENESS_KEY", "ATTEMPT", "NODE", "LAST_ERROR")
		for _, k := range tasks {
			t.row(fmt.Sprint(k.ID), timeAt(k.DiedAt), text(k.Kind), text(k.OrderingID), timeText(k.ScheduledAt),
				text(k.UniquenessKey), fmt.Sprint(k.Attempt), optional(k.NodeID), short(k.LastError, 60))
		}
		return t.flush()
	}
}

func deadShowCmd(c *cli, _ *flag.FlagSet) func([]string) error {
	return func(args []string) error {
		if err := wantArgs("dead show", args, 1, "one dead task id"); err != nil {
			return err
		}
		id, err := deadID(args[0])
		if err != nil {
			return err
		}
		tasks, err := c.dead(id, pgsched.DeadFilter{}, 1)
		if err != nil {
			return err
		}
		if len(tasks) == 0 {
			return notFoundf("no dead task has the id %d", id)
		}
		if c.json {
			return writeJSON(c.stdout, tasks[0])
		}
		return printTasks(c, tasks)
	}
}

// dead reads the dead tasks id (when not 0) and f select.
func (c *cli) dead(id int64, f pgsched.DeadFilter, limit int) ([]task, error) {
	var rows []store.CLIDead
	err := c.read(func(tx pgx.Tx) error {
		var err error
		rows, err = c.store.CLIDead(c.ctx, tx, id, store.DeadFilter(f), limit)
		return err
	})
	if err != nil {
		return nil, err
	}
	tasks := make([]task, len(rows))
	for i, r := range rows {
		tasks[i] = task{ID: r.ID, State: "dead", OrderingID: r.OrderingID, ScheduledAt: r.ScheduledAt.UTC(),
			UniquenessKey: r.UniquenessKey, Kind: r.Kind, DiedAt: timePtr(r.DiedAt), Attempt: int(r.Attempt),
			LastError: r.LastError, NodeID: r.NodeID, Payload: payload(r.Payload)}
	}
	return tasks, nil
}

func deadID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, usagef("a dead task's id is a positive whole number (dead list shows them), got %q", s)
	}
	return id, nil
}

// everyDead is the died_before that -all passes: later than any death, so
// that neither clock's skew leaves one out.
var everyDead = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// deadActCmd is dead retry and dead delete: one acts on dead tasks by id,
// or on those the filter or -all selects, in one statement.
func deadActCmd(c *cli, fs *flag.FlagSet, verb, done string,
	byID func(ctx context.Context, id int64) (int, error),
	where func(ctx context.Context, f pgsched.DeadFilter) (int, error)) func([]string) error {
	f := deadFilterFlags(fs)
	all := fs.Bool("all", false, "every dead task")
	return func(args []string) error {
		cmd := "dead " + verb
		switch {
		case len(args) > 0 && (*all || !f.empty()):
			return usagef("%s: give ids or a filter (-kind, -ordering-id, -died-after, -died-before, -all), not both", cmd)
		case len(args) == 0 && !*all && f.empty():
			return usagef("%s: name dead tasks by id, or select them with -kind, -ordering-id, -died-after or -died-before; -all selects every one", cmd)
		case *all && !f.empty():
			return usagef("%s: -all selects every dead task; it takes no other filter", cmd)
		}
		if err := c.open(); err != nil {
			return err
		}
		n := 0
		var missing []string
		if len(args) > 0 {
			ids := make([]int64, len(args))
			for i, a := range args {
				id, err := deadID(a)
				if err != nil {
					return err
				}
				ids[i] = id
			}
			for _, id := range ids {
				k, err := byID(c.ctx, id)
				if err != nil {
					return err
				}
				if k == 0 {
					missing = append(missing, fmt.Sprint(id))
				}
				n += k
			}
		} else {
			filter, err := f.filter(time.Now())
			if err != nil {
				return err
			}
			if *all {
				filter.DiedBefore = everyDead
			}
			if n, err = where(c.ctx, filter); err != nil {
				return err
			}
		}
		if c.json {
			out := map[string]any{done: n}
			if len(args) > 0 {
				out["missing"] = append([]string{}, missing...)
			}
			if err := writeJSON(c.stdout, out); err != nil {
				return err
			}
		} else {
			plural := "s"
			if n == 1 {
				plural = ""
			}
			fmt.Fprintf(c.stdout, "%s %d dead task%s\n", done, n, plural)
		}
		if len(missing) > 0 {
			return notFoundf("no dead task has the id %s", strings.Join(missing, ", "))
		}
		return nil
	}
}

func deadRetryCmd(c *cli, fs *flag.FlagSet) func([]string) error {
	return deadActCmd(c, fs, "retry", "retried",
		func(ctx context.Context, id int64) (int, error) { return c.client.RetryDead(ctx, id) },
		func(ctx context.Context, f pgsched.DeadFilter) (int, error) { return c.client.RetryDeadWhere(ctx, f) })
}

func deadDeleteCmd(c *cli, fs *flag.FlagSet) func([]string) error {
	return deadActCmd(c, fs, "delete", "deleted",
		func(ctx context.Context, id int64) (int, error) { return c.client.DeleteDead(ctx, id) },
		func(ctx context.Context, f pgsched.DeadFilter) (int, error) { return c.client.DeleteDeadWhere(ctx, f) })
}
