package pgsched

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/pgsched/pgsched/internal/store"
)

// Limit bounds a kind cluster-wide (SQL: pgsched.set_limit). A zero field
// leaves its bound unset; at least one bound is required.
type Limit struct {
	// MaxRunning: at most this many of the kind's tasks run at once,
	// counting tasks a node holds before a handler is free, and a frozen
	// node's until its lease runs out and they are rescued.
	MaxRunning int
	// MaxStarts and Per: at most MaxStarts tasks of the kind start in any
	// window of length Per (1 to 10000 starts, Per up to a day). A start
	// is counted when the database grants it, in the claim.
	MaxStarts int
	Per       time.Duration
	// PerGroup: MaxRunning and MaxStarts bound each group of the kind
	// (Task.GroupKey; tasks without one are a group) apart, not the kind
	// as a whole: "each customer at most 5 at once", "each customer at
	// most 10 calls a second".
	PerGroup bool
}

// LimitInfo is a limited kind as the pgsched.limits view shows it.
type LimitInfo struct {
	Kind  string
	Limit Limit
	// Running counts the tasks running under the limit; StartedInWindow,
	// the starts of the last Per (with PerGroup, both summed over the
	// groups).
	Running         int
	StartedInWindow int
	// Waiting counts the kind's idle tasks held back for room (due now or
	// later).
	Waiting   int64
	Paused    bool
	UpdatedAt time.Time
}

// check says what is wrong with l for kind in the words pgsched.set_limit
// uses (its limit_error), or returns nil.
func (l Limit) check(kind string) error {
	var reason string
	switch {
	case kind == "":
		reason = "kind is required"
	case len(kind) > 255:
		reason = fmt.Sprintf("kind is %d bytes, over the limit of 255", len(kind))
	case l.MaxRunning == 0 && l.MaxStarts == 0:
		reason = "a limit needs max_running, or max_starts with per"
	case l.MaxRunning < 0:
		reason = fmt.Sprintf("max_running must be at least 1, got %d", l.MaxRunning)
	case (l.MaxStarts == 0) != (l.Per == 0):
		reason = "max_starts and per go together"
	case l.MaxStarts < 0 || l.MaxStarts > 10000:
		reason = fmt.Sprintf("max_starts must be from 1 to 10000, got %d", l.MaxStarts)
	case l.Per < 0:
		reason = fmt.Sprintf("per must be positive, got %s seconds", seconds(l.Per))
	case l.Per > 24*time.Hour:
		reason = fmt.Sprintf("per must be at most a day, got %s seconds", seconds(l.Per))
	case l.Per != 0 && l.Per < time.Microsecond:
		reason = fmt.Sprintf("per must be at least a microsecond, got %s seconds", seconds(l.Per))
	default:
		if err := validateText(-1, "kind", kind); err != nil {
			return err
		}
		return nil
	}
	return fmt.Errorf("pgsched: %w: %s", ErrInvalidTask, reason)
}

// SetLimit limits kind cluster-wide, replacing any limit it had, and
// reports whether it had none. A task held back waits without using an
// attempt and starts when the limit allows; strict order per ordering_id
// holds (a task behind one held back waits too). Tasks already running
// when a kind is first limited are not counted: until they end, more may
// run than MaxRunning. On Citus, see docs/limits.md ("On Citus").
func (c *Client) SetLimit(ctx context.Context, kind string, l Limit) (bool, error) {
	if err := l.check(kind); err != nil {
		return false, err
	}
	fresh, err := c.store.SetLimit(ctx, c.pool, kind, store.Limit(l))
	if err != nil {
		return false, fmt.Errorf("pgsched: set limit of %q: %w", kind, err)
	}
	return fresh, nil
}

// ClearLimit removes kind's limit (pgsched.clear_limit): its waiting
// tasks run as any other kind's. It reports whether kind had a limit.
func (c *Client) ClearLimit(ctx context.Context, kind string) (bool, error) {
	if err := validateText(-1, "kind", kind); err != nil {
		return false, err
	}
	ok, err := c.store.ClearLimit(ctx, c.pool, kind)
	if err != nil {
		return false, fmt.Errorf("pgsched: clear limit of %q: %w", kind, err)
	}
	return ok, nil
}

// Limits lists the limited kinds by name with what their limits count
// now (the pgsched.limits view).
func (c *Client) Limits(ctx context.Context) ([]LimitInfo, error) {
	rows, err := c.store.Limits(ctx, c.pool)
	if err != nil {
		return nil, fmt.Errorf("pgsched: limits: %w", err)
	}
	out := make([]LimitInfo, len(rows))
	for i, r := range rows {
		out[i] = LimitInfo{Kind: r.Kind, Limit: Limit(r.Limit), Running: r.Running, StartedInWindow: r.StartedInWindow,
			Waiting: r.Waiting, Paused: r.Paused, UpdatedAt: r.UpdatedAt}
	}
	return out, nil
}

// GroupWeight is a group's weight in its kind's fair share, as the
// pgsched.group_weights view shows it: while the kind's limit holds tasks
// back, each round of its groups gives this group Weight turns and every
// group without a weight one.
type GroupWeight struct {
	Kind     string
	GroupKey string // "" for the kind's tasks without a group_key
	Weight   int
	// Limited: the kind has a limit now (without one, weights wait).
	Limited   bool
	UpdatedAt time.Time
}

// MaxGroupWeight is the largest weight SetGroupWeight takes.
const MaxGroupWeight = 1000

// SetGroupWeight gives group (a Task.GroupKey; "" for tasks without one)
// of kind a weight from 1 to MaxGroupWeight in the kind's fair share
// (SQL: pgsched.set_group_weight): while the kind's limit holds tasks
// back, each round of its groups gives the group weight turns, every
// group without a weight one. 1 is the default and removes the weight.
// It takes effect at the kind's next claim, needs no limit to be set
// first, and outlives ClearLimit. It returns the weight the group had.
func (c *Client) SetGroupWeight(ctx context.Context, kind, group string, weight int) (int, error) {
	if err := checkGroupWeight(kind, group, weight); err != nil {
		return 0, err
	}
	was, err := c.store.SetGroupWeight(ctx, c.pool, kind, group, weight)
	if err != nil {
		return 0, fmt.Errorf("pgsched: set weight of group %q of %q: %w", group, kind, err)
	}
	return was, nil
}

// GroupWeights lists the groups given a weight, by kind and group.
func (c *Client) GroupWeights(ctx context.Context) ([]GroupWeight, error) {
	rows, err := c.store.GroupWeights(ctx, c.pool)
	if err != nil {
		return nil, fmt.Errorf("pgsched: group weights: %w", err)
	}
	out := make([]GroupWeight, len(rows))
	for i, r := range rows {
		out[i] = GroupWeight(r)
	}
	return out, nil
}

// checkGroupWeight says what is wrong with SetGroupWeight's arguments in
// the words pgsched.set_group_weight uses, or returns nil.
func checkGroupWeight(kind, group string, weight int) error {
	for _, f := range []struct{ field, v string }{{"kind", kind}, {"group_key", group}} {
		if err := validateText(-1, f.field, f.v); err != nil {
			return err
		}
	}
	var reason string
	switch {
	case kind == "":
		reason = "kind is required"
	case len(kind) > 255:
		reason = fmt.Sprintf("kind is %d bytes, over the limit of 255", len(kind))
	case hasControl(kind):
		reason = "kind contains a control character"
	case len(group) > 255:
		reason = fmt.Sprintf("group_key is %d bytes, over the limit of 255", len(group))
	case hasControl(group):
		reason = "group_key contains a control character"
	case weight < 1 || weight > MaxGroupWeight:
		reason = fmt.Sprintf("weight must be from 1 to %d, got %d", MaxGroupWeight, weight)
	default:
		return nil
	}
	return fmt.Errorf("pgsched: %w: %s", ErrInvalidTask, reason)
}

// hasControl reports whether s holds an ASCII control character (NUL is
// textProblem's).
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}

// seconds formats d as pgsched.limit_error does an interval: seconds,
// no trailing zeros.
func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }
