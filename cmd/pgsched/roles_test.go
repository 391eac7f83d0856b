package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
)

// TestRoles: as <schema>_read every command that reads works and every one
// that acts exits 1, saying permission denied and which role may, and
// changes nothing; as <schema>_worker the same commands act; as
// <schema>_enqueue, which may not read the views, reading exits 1 saying
// which roles may.
func TestRoles(t *testing.T) {
	t.Parallel()
	schema := pgtest.RolesSchema(t, "cli")
	ctx := context.Background()
	admin := &pgtest.DB{URL: pgtest.ServerURL(t), Schema: schema, Pool: pgtest.AdminPool(t)}
	client, err := pgsched.NewClient(admin.Pool, pgsched.ClientConfig{Schema: schema})
	require.NoError(t, err)
	admin.InsertTask(t, pgtest.TaskRow{OrderingID: "order-1", UniquenessKey: "u1", Kind: "mail", State: "pending"})
	dead := admin.InsertTask(t, pgtest.TaskRow{OrderingID: "order-2", UniquenessKey: "u2", Kind: "mail", State: "dead"})
	_, err = client.UpsertRecurring(ctx, pgsched.Recurring{Name: "nightly", Spec: "@daily", Kind: "report"})
	require.NoError(t, err)
	_, err = admin.Pool.Exec(ctx, "SELECT "+schema+".count_kinds()")
	require.NoError(t, err)

	as := func(role string, args ...string) result {
		return pgschedAt(t, roleURL(t, admin.URL, schema+role), schema, args...)
	}
	reads := [][]string{
		{"status"}, {"status", "-json"}, {"tasks", "list"}, {"tasks", "list", "-ordering-id", "order-1"},
		{"tasks", "show", "u1"}, {"tasks", "show", "u2", "-ordering-id", "order-2"}, {"dead", "list"},
		{"dead", "list", "-ordering-id", "order-2"}, {"dead", "show", fmt.Sprint(dead)}, {"kinds", "list"}, {"recurring", "list"},
	}
	acts := []struct {
		args []string
		who  string
	}{
		{[]string{"kinds", "pause", "mail"}, schema + "_worker or the schema's owner"},
		{[]string{"dead", "retry", fmt.Sprint(dead)}, schema + "_worker or the schema's owner"},
		{[]string{"dead", "retry", "-all"}, schema + "_worker or the schema's owner"},
		{[]string{"dead", "delete", "-kind", "mail"}, schema + "_worker or the schema's owner"},
		{[]string{"recurring", "pause", "nightly"}, schema + "_worker or " + schema + "_enqueue, or the schema's owner"},
	}

	for _, args := range reads {
		r := as("_read", args...)
		require.Equal(t, exitOK, r.code, "%q as _read: %s", args, r.stderr)
		require.NotEmpty(t, r.stdout)
	}
	for _, a := range acts {
		r := as("_read", a.args...)
		require.Equal(t, exitFailed, r.code, "%q as _read", a.args)
		require.Contains(t, r.stderr, "pgsched: "+a.args[0]+" "+a.args[1]+": permission denied for function", "%q", a.args)
		require.Contains(t, r.stderr, "this command acts, which only the role "+a.who+" may do ("+schema+"_read may only look)", "%q", a.args)
		require.Empty(t, r.stdout)
	}
	// Nothing changed.
	kinds, err := client.PausedKinds(ctx)
	require.NoError(t, err)
	require.Empty(t, kinds)
	r := as("_read", "dead", "list", "-json")
	require.Contains(t, r.stdout, fmt.Sprintf(`"id": %d`, dead))
	r = as("_read", "recurring", "list", "-json")
	require.Contains(t, r.stdout, `"paused": false`)

	for _, args := range reads {
		r := as("_enqueue", args...)
		require.Equal(t, exitFailed, r.code, "%q as _enqueue", args)
		require.Contains(t, r.stderr, "permission denied for", "%q", args)
		require.Contains(t, r.stderr, "reading needs the role "+schema+"_read, "+schema+"_worker or the schema's owner", "%q", args)
	}

	// The operator acts.
	type action struct {
		args []string
		out  string
	}
	actions := []action{
		{[]string{"kinds", "pause", "mail"}, "paused kind mail\n"},
		{[]string{"recurring", "pause", "nightly"}, "paused recurring schedule nightly\n"},
		{[]string{"recurring", "resume", "nightly"}, "resumed recurring schedule nightly\n"},
		{[]string{"kinds", "resume", "mail"}, "resumed kind mail\n"},
	}
	// Also on Citus, where retry_dead_ids once failed for any role but
	// the owner (its DELETE ran as the caller, the schedule_many it calls
	// as the owner, and Citus refuses two users on one placement in a
	// transaction).
	actions = append(actions, action{[]string{"dead", "retry", fmt.Sprint(dead)}, "retried 1 dead task\n"})
	for _, want := range actions {
		r := as("_worker", want.args...)
		require.Equal(t, exitOK, r.code, "%q as _worker: %s", want.args, r.stderr)
		require.Equal(t, want.out, r.stdout)
	}
	r = as("_worker", "tasks", "list", "-ordering-id", "order-2")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, 2, len(strings.Split(strings.TrimSpace(r.stdout), "\n")), "the retried task is pending:\n%s", r.stdout)
	r = as("_worker", "dead", "list", "-json")
	require.Equal(t, "[]\n", r.stdout, "the dead task is gone")
}
