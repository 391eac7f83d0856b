package pgsched

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/pgsched/pgsched/internal/cronspec"
	"github.com/pgsched/pgsched/internal/store"
)

// The missed-tick policies of a recurring schedule: what runs for ticks
// that fell while no node ran.
const (
	MissedSkip = "skip" // none
	MissedOne  = "one"  // one catch-up run, for the latest (the default)
	MissedAll  = "all"  // every one, in order, at most 100 (the latest)
)

// Recurring is a recurring schedule: a task of Kind with Payload at every
// tick of Spec in TimeZone. Its ticks are ordinary tasks with OrderingID
// Name (so they run one at a time, in order) and UniquenessKey "tick "
// followed by the tick's time in UTC (RFC 3339), each created once across
// the cluster.
type Recurring struct {
	// Name identifies the schedule and is the ordering_id of its ticks:
	// 1..255 bytes.
	Name string
	// Spec is a five-field cron spec ("30 2 * * *"), six fields with
	// seconds first, a shorthand (@hourly, @daily, @weekly, @monthly,
	// @yearly) or "@every <duration>" (a whole number of seconds, at least
	// 1s). See docs/api.md for the daylight-saving rule.
	Spec string
	// TimeZone is an IANA name; cron fields are its wall-clock times.
	// Defaults to UTC.
	TimeZone string
	// Kind and Payload of every tick. Kind defaults to "default", Payload
	// to {}.
	Kind    string
	Payload json.RawMessage
	// Missed is MissedSkip, MissedOne (the default) or MissedAll.
	Missed string
}

// RecurringInfo is a recurring schedule with its state (the
// pgsched.recurring view).
type RecurringInfo struct {
	Recurring
	Paused bool
	// NextRunAt is its next tick (zero while paused with none pending).
	NextRunAt time.Time
	// LastRunAt is when its last tick ended, LastResult how: "completed" or
	// "dead" ("" before the first).
	LastRunAt  time.Time
	LastResult string
	// FailingSince is when the leader set the schedule aside because it
	// cannot create its ticks, Error why (zero and "": it can). Such a
	// schedule gets no ticks and does not delay the others; it is tried
	// again now and then, and an upsert or a resume takes it back at once.
	// Upserts refuse what would fail, so only a row written otherwise
	// (before they checked as much, or by hand) can.
	FailingSince time.Time
	Error        string
}

// Check returns what the database would refuse in r, in the same words,
// without a round trip: an ErrInvalidTask naming the field, or nil. Like
// Client.Schedule it leaves the payload's size limit (of the stored jsonb,
// set at migrate time) to the database, and refuses, naming the field,
// what PostgreSQL cannot store: invalid UTF-8, NUL bytes, a payload that
// is not JSON or that jsonb cannot hold.
func (r Recurring) Check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: recurring schedule: %s", ErrInvalidTask, fmt.Sprintf(format, args...))
	}
	switch {
	case r.Name == "":
		return bad("name is required")
	case len(r.Name) > 255:
		return bad("name is %d bytes, over the limit of 255", len(r.Name))
	}
	if reason := r.inputProblem(); reason != "" {
		return bad("%s", reason)
	}
	if _, err := cronspec.Parse(r.Spec); err != nil {
		return bad("spec: %s", strings.TrimPrefix(err.Error(), "cronspec: "))
	}
	if strings.ContainsFunc(r.TimeZone, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
		return bad("time_zone contains a control character")
	}
	if _, err := cronspec.LoadZone(r.TimeZone); err != nil {
		return bad(`time_zone "%s" is not an IANA time zone name`, r.TimeZone)
	}
	switch r.Missed {
	case "", MissedSkip, MissedOne, MissedAll:
	default:
		return bad(`missed must be skip, one or all, got "%s"`, r.Missed)
	}
	// Every tick is a task of this kind: schedule_many would refuse it in
	// every tick, in these words.
	if len(r.Kind) > 255 {
		return bad("kind is %d bytes, over the limit of 255", len(r.Kind))
	}
	return nil
}

func (r Recurring) def() store.RecurringDef {
	payload := []byte(r.Payload)
	if len(payload) == 0 {
		payload = []byte("{}")
	}
	return store.RecurringDef{Name: r.Name, Spec: r.Spec, TimeZone: r.TimeZone, Kind: r.Kind, Missed: r.Missed, Payload: payload}
}

// UpsertRecurring creates or changes a recurring schedule, as SQL's
// pgsched.recurring_upsert does, and returns Inserted or Updated. A
// change drops the schedule's ticks not yet due; ticks start again from
// the next after now. Invalid fields are an ErrInvalidTask naming the
// field; nothing is stored.
func (c *Client) UpsertRecurring(ctx context.Context, r Recurring) (Result, error) {
	if err := r.Check(); err != nil {
		return "", err
	}
	res, err := c.store.RecurringUpsert(ctx, c.pool, r.def())
	if err != nil {
		return "", fmt.Errorf("pgsched: recurring schedule %q: %w", r.Name, err)
	}
	return Result(res), nil
}

// PauseRecurring stops a schedule (pgsched.recurring_pause): its ticks not
// yet due are dropped and none is created until ResumeRecurring. It
// reports whether it was not paused; ErrNotFound when there is none.
func (c *Client) PauseRecurring(ctx context.Context, name string) (bool, error) {
	ok, err := c.store.RecurringPause(ctx, c.pool, name)
	if err != nil {
		return false, fmt.Errorf("pgsched: pause recurring schedule %q: %w", name, err)
	}
	return ok, nil
}

// ResumeRecurring starts a paused schedule again from its next tick after
// now (pgsched.recurring_resume). It reports whether it was paused;
// ErrNotFound when there is none.
func (c *Client) ResumeRecurring(ctx context.Context, name string) (bool, error) {
	ok, err := c.store.RecurringResume(ctx, c.pool, name)
	if err != nil {
		return false, fmt.Errorf("pgsched: resume recurring schedule %q: %w", name, err)
	}
	return ok, nil
}

// DeleteRecurring removes a schedule and its ticks not yet due
// (pgsched.recurring_delete) and reports whether there was one.
func (c *Client) DeleteRecurring(ctx context.Context, name string) (bool, error) {
	ok, err := c.store.RecurringDelete(ctx, c.pool, name)
	if err != nil {
		return false, fmt.Errorf("pgsched: delete recurring schedule %q: %w", name, err)
	}
	return ok, nil
}

// ListRecurring returns every recurring schedule with its state, by name.
func (c *Client) ListRecurring(ctx context.Context) ([]RecurringInfo, error) {
	rows, err := c.store.RecurringList(ctx, c.pool)
	if err != nil {
		return nil, fmt.Errorf("pgsched: list recurring schedules: %w", err)
	}
	out := make([]RecurringInfo, len(rows))
	for i, r := range rows {
		out[i] = RecurringInfo{
			Recurring: Recurring{Name: r.Name, Spec: r.Spec, TimeZone: r.TimeZone, Kind: r.Kind, Payload: json.RawMessage(r.Payload), Missed: r.Missed},
			Paused:    r.Paused, NextRunAt: r.NextRunAt, LastRunAt: r.LastRunAt, LastResult: r.LastResult,
			FailingSince: r.FailingSince, Error: r.Error,
		}
	}
	return out, nil
}
