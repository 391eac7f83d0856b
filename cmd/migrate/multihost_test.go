package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/pgtest"
)

// TestMultiHostConnectionString: migrate takes pgx's multi-host form and
// works on whichever server accepts writes, here the second one named.
func TestMultiHostConnectionString(t *testing.T) {
	t.Parallel()
	if pgtest.Citus() {
		t.Skip("runs on servers of its own, the same with or without Citus; the single-server suite runs it")
	}
	rep := pgtest.NewReplicated(t, false)
	url := rep.StandbyFirstURL()
	var out bytes.Buffer
	env := map[string]string{"DATABASE_URL": url, "PGSCHED_SCHEMA": "multihost"}
	getenv := func(k string) string { return env[k] }
	require.NoError(t, run(context.Background(), []string{"up"}, getenv, &out, &out), out.String())
	out.Reset()
	require.NoError(t, run(context.Background(), []string{"status"}, getenv, &out, &out), out.String())
	require.Contains(t, out.String(), "00011", "status lists the applied migrations")
}
