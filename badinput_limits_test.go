package pgsched_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
)

// TestPayloadSizeAsStored: the limit applies to the payload as stored, the
// same from Go and SQL: compact or padded text does not matter, numbers
// cost more stored than written, and a payload just under the limit stores.
func TestPayloadSizeAsStored(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	future := time.Now().Add(time.Hour)

	// 800 kB of compact JSON, typical content: objects of strings.
	var sb strings.Builder
	sb.WriteString("[")
	for i := 0; sb.Len() < 800_000; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"id":"%08d","name":"user %d","email":"user%d@example.com","note":"%s"}`, i, i, i, strings.Repeat("n", 40))
	}
	sb.WriteString("]")
	compact := json.RawMessage(sb.String())
	// The same padded with whitespace to 5 MiB: stored the same.
	padded := json.RawMessage(strings.ReplaceAll(string(compact), ",", strings.Repeat(" ", 400)+","))
	require.Greater(t, len(padded), 5<<20)

	for i, pl := range []json.RawMessage{compact, padded} {
		task := pgsched.Task{OrderingID: fmt.Sprintf("go-%d", i), ScheduledAt: future, Payload: pl}
		res, err := b.client.Schedule(ctx, task)
		require.NoError(t, err)
		require.Equal(t, pgsched.Inserted, res)
		task.OrderingID = fmt.Sprintf("sql-%d", i)
		require.NoError(t, sqlSchedule(b, asSQL(task)))
	}
	var sizes []int
	rows, err := b.db.Pool.Query(ctx, "SELECT pg_column_size(payload::text::jsonb) FROM "+b.db.Schema+".tasks ORDER BY ordering_id")
	require.NoError(t, err)
	for rows.Next() {
		var n int
		require.NoError(t, rows.Scan(&n))
		sizes = append(sizes, n)
	}
	require.NoError(t, rows.Err())
	require.Len(t, sizes, 4)
	for _, n := range sizes {
		require.Equal(t, sizes[0], n, "compact and padded store the same")
		require.Less(t, n, 1<<20)
	}

	// A payload exactly at the limit stores; one byte more does not.
	at := json.RawMessage(`"` + strings.Repeat("a", 1<<20-12) + `"`)
	_, err = b.client.Schedule(ctx, pgsched.Task{OrderingID: "at-limit", ScheduledAt: future, Payload: at})
	require.NoError(t, err)
	over := json.RawMessage(`"` + strings.Repeat("a", 1<<20-11) + `"`)
	_, err = b.client.Schedule(ctx, pgsched.Task{OrderingID: "over-limit", ScheduledAt: future, Payload: over})
	require.ErrorIs(t, err, pgsched.ErrInvalidTask)
	require.Equal(t, "payload is 1048577 bytes as stored (jsonb), over the limit of 1048576 bytes", reason(err))
	err = sqlSchedule(b, asSQL(pgsched.Task{OrderingID: "over-limit", ScheduledAt: future, Payload: over}))
	require.Equal(t, "PGS01", sqlState(err))
	require.Equal(t, "payload is 1048577 bytes as stored (jsonb), over the limit of 1048576 bytes", reason(err))
}

// TestInputLimitsAccepted: the values just inside every limit store, the
// same from Go and SQL, and an empty kind means "default" both ways.
func TestInputLimitsAccepted(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	future := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	last := time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	cases := []pgsched.Task{
		{ScheduledAt: last},
		{ScheduledAt: future, Kind: ""},
		{ScheduledAt: future, Kind: "tab-free kind with spaces ünd ümlauts"},
		{ScheduledAt: future, Payload: nested(126, "[", "]", "")},
		{ScheduledAt: future, Payload: nested(125, `{"k":`, "}", "{}")},
		{ScheduledAt: future, Payload: json.RawMessage(`{"pad":"` + strings.Repeat("p", 5000) + `","deep":` + string(nested(62, `[{"a":1,"b":`, "}]", `["x"]`)) + `}`)},
		{ScheduledAt: future, Payload: nested(126, "[", "]", `"leaf"`)},
		{ScheduledAt: future, Payload: json.RawMessage(`{"escaped":"\\u0000","pair":"\ud83d\ude00","big":1e131071,"small":1e-16383,"zero":0e1000000,"neg":-0.5}`)},
	}
	for i, task := range cases {
		for _, via := range []string{"go", "sql"} {
			task.OrderingID = fmt.Sprintf("%s-%d", via, i)
			if via == "go" {
				_, err := b.client.Schedule(ctx, task)
				require.NoError(t, err, "case %d", i)
			} else {
				require.NoError(t, sqlSchedule(b, asSQL(task)), "case %d", i)
			}
			var kind string
			var at time.Time
			require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT kind, scheduled_at FROM "+b.db.Schema+".tasks WHERE ordering_id = $1",
				task.OrderingID).Scan(&kind, &at))
			require.True(t, at.Equal(task.ScheduledAt), "case %d via %s: %v stored as %v", i, via, task.ScheduledAt, at)
			if task.Kind == "" {
				require.Equal(t, "default", kind)
			} else {
				require.Equal(t, task.Kind, kind)
			}
		}
	}
	// NULL kind and payload from SQL: the defaults.
	_, err := b.db.Pool.Exec(ctx, "SELECT "+b.db.Schema+".schedule('null-kind', now() + interval '1 hour', '', NULL, NULL)")
	require.NoError(t, err)
	var kind, payload string
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT kind, payload::text FROM "+b.db.Schema+".tasks WHERE ordering_id = 'null-kind'").Scan(&kind, &payload))
	require.Equal(t, "default", kind)
	require.Equal(t, "{}", payload)
}

// TestPayloadRulesMatchPostgres: for numbers and escapes, the Go client
// refuses exactly what jsonb refuses.
func TestPayloadRulesMatchPostgres(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	future := time.Now().Add(time.Hour)
	values := []string{
		`1e131071`, `9.999e131071`, `1e131072`, `0.1e131072`, `0.01e131073`, `10e131070`, `100e131070`,
		`1e-16383`, `1e-16384`, `1.5e-16383`, `0.5e-16382`, `0e-16383`, `0e-16384`, `0e1000000`, `0e1073741822`, `0e1073741823`,
		`1e1073741822`, `-1e-1073741822`, `0.` + strings.Repeat("0", 16382) + `1`, `0.` + strings.Repeat("0", 16383) + `1`,
		`1.` + strings.Repeat("0", 16383), `1.` + strings.Repeat("0", 16384), strings.Repeat("9", 131072), strings.Repeat("9", 131073),
		`-0`, `-0.0e-5`, `123.456E+2`, `1E-0`,
		`"\u0000"`, `"\\u0000"`, `"\\\u0000"`, `"\ud800"`, `"\udc00"`, `"\ud800\udc00"`, `"\uD83D\uDE00"`, `"\ud800\ud800"`,
		`"\ud800x"`, `"\ud800\u0041"`, `"\udbff\udfff"`, `"\u00e9"`, `"\uffff"`,
	}
	for i, v := range values {
		task := pgsched.Task{OrderingID: fmt.Sprintf("v%d", i), ScheduledAt: future, Payload: json.RawMessage(`[` + v + `]`)}
		_, goErr := b.client.Schedule(ctx, task)
		var pgErr error
		_, pgErr = b.db.Pool.Exec(ctx, "SELECT $1::text::jsonb", string(task.Payload))
		if pgErr == nil {
			require.NoError(t, goErr, "jsonb takes %.40s", v)
		} else {
			require.ErrorIs(t, goErr, pgsched.ErrInvalidTask, "jsonb refuses %.40s: %v", v, pgErr)
			require.Contains(t, goErr.Error(), "payload")
		}
	}
}
