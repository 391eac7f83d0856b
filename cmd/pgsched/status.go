package main

import (
	"flag"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsched/pgsched/internal/store"
)

// status is what pgsched status shows, and its JSON.
type status struct {
	Now        time.Time   `json:"now"`
	Leader     string      `json:"leader"` // "": none
	Nodes      []node      `json:"nodes"`
	Partitions partitions  `json:"partitions"`
	Kinds      []kindCount `json:"kinds"`
	// LagSeconds is how long the oldest due task of a kind not paused has
	// waited (0: none waits).
	LagSeconds float64 `json:"lag_seconds"`
	// CountedAt is when the leader last counted the kinds (null: never).
	CountedAt *time.Time `json:"counted_at"`
}

type node struct {
	NodeID              string   `json:"node_id"`
	Epoch               int64    `json:"epoch"`
	Live                bool     `json:"live"`
	Leaving             bool     `json:"leaving"`
	Leader              bool     `json:"leader"`
	SinceRenewalSeconds float64  `json:"since_renewal_seconds"`
	Partitions          []int32  `json:"partitions"`
	Backup              string   `json:"backup"`
	StandingInFor       []string `json:"standing_in_for"`
	Host                string   `json:"host"`
	PID                 int32    `json:"pid"`
}

// partitions sums up who serves the logical partitions.
type partitions struct {
	Total int `json:"total"`
	// Unassigned have no owner yet (no leader has planned since they
	// exist).
	Unassigned int `json:"unassigned"`
	// ByOwner are served by their live owner, ByStandIn by the stand-in of
	// a down owner; Unserved by nobody: their tasks wait.
	ByOwner   int `json:"served_by_owner"`
	ByStandIn int `json:"served_by_stand_in"`
	Unserved  int `json:"unserved"`
}

// kindCount is a kind as the leader last counted it; status adds its lag.
// The counts are null for a kind with a due task the leader has not
// counted yet.
type kindCount struct {
	Kind     string     `json:"kind"`
	Pending  *int64     `json:"pending"`
	Due      *int64     `json:"due"`
	Running  *int64     `json:"running"`
	Dead     *int64     `json:"dead"`
	Paused   bool       `json:"paused"`
	PausedAt *time.Time `json:"paused_at"`
	// LagSeconds is how long the kind's oldest due task has waited to
	// start (status only).
	LagSeconds  *float64   `json:"lag_seconds,omitempty"`
	OldestDueAt *time.Time `json:"oldest_due_at,omitempty"`
}

func statusCmd(c *cli, _ *flag.FlagSet) func([]string) error {
	return func(args []string) error {
		if err := wantArgs("status", args, 0, ""); err != nil {
			return err
		}
		var st status
		err := c.read(func(tx pgx.Tx) error {
			var err error
			if st.Now, err = c.store.ConsoleNow(c.ctx, tx); err != nil {
				return err
			}
			nodes, err := c.store.ConsoleNodes(c.ctx, tx)
			if err != nil {
				return err
			}
			parts, err := c.store.ConsolePartitions(c.ctx, tx)
			if err != nil {
				return err
			}
			kinds, err := c.store.CLIKinds(c.ctx, tx)
			if err != nil {
				return err
			}
			lags, err := c.store.CLIKindLag(c.ctx, tx)
			if err != nil {
				return err
			}
			st.fill(nodes, parts, kinds, lags)
			return nil
		})
		if err != nil {
			return err
		}
		if c.json {
			return writeJSON(c.stdout, st)
		}
		return st.print(c)
	}
}

func (st *status) fill(nodes []store.ConsoleNode, parts []store.ConsolePartition, kinds []store.CLIKind, lags []store.CLIKindLag) {
	st.Nodes = make([]node, len(nodes))
	for i, n := range nodes {
		st.Nodes[i] = node{NodeID: n.NodeID, Epoch: n.Epoch, Live: n.Live, Leaving: n.Leaving, Leader: n.Leader,
			SinceRenewalSeconds: n.SinceRenewalSeconds, Partitions: n.Partitions, Backup: n.Backup,
			StandingInFor: n.StandingInFor, Host: n.Host, PID: n.Pid}
		if n.Leader {
			st.Leader = n.NodeID
		}
	}
	st.Partitions.Total = len(parts)
	for _, p := range parts {
		switch {
		case p.Owner == "":
			st.Partitions.Unassigned++
			st.Partitions.Unserved++
		case p.ServedBy == "":
			st.Partitions.Unserved++
		case p.ServedBy == p.Owner:
			st.Partitions.ByOwner++
		default:
			st.Partitions.ByStandIn++
		}
	}
	st.Kinds = counts(kinds)
	idx := map[string]int{}
	for i, k := range kinds {
		idx[k.Kind] = i
		if !k.CountedAt.IsZero() {
			st.CountedAt = timePtr(k.CountedAt)
		}
	}
	for _, l := range lags {
		i, ok := idx[l.Kind]
		if !ok {
			// Due, and not counted yet: the count is older than the task.
			st.Kinds = append(st.Kinds, kindCount{Kind: l.Kind})
			i = len(st.Kinds) - 1
			idx[l.Kind] = i
		}
		k := &st.Kinds[i]
		lag := max(l.LagSeconds, 0)
		k.LagSeconds, k.OldestDueAt = &lag, timePtr(l.OldestDueAt)
		if !k.Paused {
			st.LagSeconds = max(st.LagSeconds, lag)
		}
	}
	sort.Slice(st.Kinds, func(i, j int) bool { return st.Kinds[i].Kind < st.Kinds[j].Kind })
	for i := range st.Kinds {
		if st.Kinds[i].LagSeconds == nil {
			zero := 0.0
			st.Kinds[i].LagSeconds = &zero
		}
	}
	st.Now = st.Now.UTC()
}

// counts converts the leader's counts.
func counts(kinds []store.CLIKind) []kindCount {
	out := make([]kindCount, len(kinds))
	for i, k := range kinds {
		out[i] = kindCount{Kind: k.Kind, Pending: &k.Pending, Due: &k.Due, Running: &k.Running, Dead: &k.Dead,
			Paused: k.Paused, PausedAt: timePtr(k.PausedAt)}
	}
	return out
}

func (st *status) print(c *cli) error {
	live := 0
	for _, n := range st.Nodes {
		if n.Live {
			live++
		}
	}
	leader := st.Leader
	if leader == "" {
		leader = "none"
	}
	counted := "never (no leader has counted yet)"
	if st.CountedAt != nil {
		counted = ago(st.Now, *st.CountedAt) + " by the leader"
	}
	p := st.Partitions
	fmt.Fprintf(c.stdout, "nodes       %d (%d live), leader %s\n", len(st.Nodes), live, text(leader))
	fmt.Fprintf(c.stdout, "partitions  %d: %d served by their owner, %d by a stand-in, %d unserved (%d unassigned)\n",
		p.Total, p.ByOwner, p.ByStandIn, p.Unserved, p.Unassigned)
	fmt.Fprintf(c.stdout, "lag         %s (the oldest due task of a kind not paused)\n", seconds(st.LagSeconds))
	fmt.Fprintf(c.stdout, "counted     %s\n", counted)
	if len(st.Nodes) > 0 {
		fmt.Fprintln(c.stdout)
		t := newTable(c.stdout, "NODE", "LIVE", "LEADER", "RENEWED", "PARTITIONS", "BACKUP", "STANDING_IN_FOR", "HOST", "PID")
		for _, n := range st.Nodes {
			live := yesNo(n.Live)
			if n.Leaving {
				live += " (leaving)"
			}
			standing := make([]string, len(n.StandingInFor))
			for i, s := range n.StandingInFor {
				standing[i] = text(s)
			}
			t.row(text(n.NodeID), live, yesNo(n.Leader), seconds(n.SinceRenewalSeconds)+" ago", fmt.Sprint(len(n.Partitions)),
				optional(n.Backup), optional(strings.Join(standing, ",")), optional(n.Host), fmt.Sprint(n.PID))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(st.Kinds) > 0 {
		fmt.Fprintln(c.stdout)
		return printKinds(c, st.Kinds, true)
	}
	return nil
}

// printKinds prints the kinds as a table, with their lag when withLag.
func printKinds(c *cli, kinds []kindCount, withLag bool) error {
	headers := []string{"KIND", "PENDING", "DUE", "RUNNING", "DEAD", "PAUSED"}
	if withLag {
		headers = append(headers, "LAG")
	}
	t := newTable(c.stdout, headers...)
	for _, k := range kinds {
		paused := "no"
		if k.PausedAt != nil {
			paused = "since " + timeAt(k.PausedAt)
		}
		row := []string{text(k.Kind), count(k.Pending), count(k.Due), count(k.Running), count(k.Dead), paused}
		if withLag {
			row = append(row, seconds(*k.LagSeconds))
		}
		t.row(row...)
	}
	return t.flush()
}

// count is a count or "-" when there is none.
func count(n *int64) string {
	if n == nil {
		return "-"
	}
	return fmt.Sprint(*n)
}
