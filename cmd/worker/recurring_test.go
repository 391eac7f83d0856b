package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLoadRecurring(t *testing.T) {
	t.Parallel()
	write := func(body string) string {
		p := filepath.Join(t.TempDir(), "recurring.json")
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	rs, err := loadRecurring(write(`[{"name": "nightly", "spec": "30 2 * * *", "time_zone": "Europe/Berlin", "kind": "report",
		"payload": {"format": "pdf"}, "missed": "all"}, {"name": "beat", "spec": "@every 10s"}]`))
	require.NoError(t, err)
	require.Len(t, rs, 2)
	require.Equal(t, "Europe/Berlin", rs[0].TimeZone)
	require.JSONEq(t, `{"format": "pdf"}`, string(rs[0].Payload))
	require.Equal(t, "@every 10s", rs[1].Spec)

	none, err := loadRecurring("")
	require.NoError(t, err)
	require.Nil(t, none)

	for body, want := range map[string]string{
		`[{"name": "a", "spec": "61 * * * *"}]`:                               `entry 1: invalid task: recurring schedule: spec: minute field "61"`,
		`[{"name": "a", "spec": "@daily", "zone": "UTC"}]`:                    `unknown field "zone"`,
		`[{"name": "a", "spec": "@daily"}, {"name": "a", "spec": "@hourly"}]`: `entry 2: name "a" given twice`,
		`{"name": "a"}`: "want a JSON array",
	} {
		_, err := loadRecurring(write(body))
		require.ErrorContains(t, err, want, body)
		require.ErrorContains(t, err, "PGSCHED_RECURRING_FILE (-recurring-file)")
	}
	_, err = loadRecurring(filepath.Join(t.TempDir(), "missing.json"))
	require.ErrorContains(t, err, "no such file")
}
