package pgsched_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
)

// TestRecurringSpecParity: SQL's recurring_spec_error accepts and refuses
// exactly what the Go parser does, with the same message.
func TestRecurringSpecParity(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	specs := []string{
		"* * * * *", "30 2 * * *", "15 30 2 * * *", "0 0 29 2 *", "0 0 31 * *", "*/15 * * * *", "0 9 * * MON-FRI",
		"0 0 13 * FRI", "0 0 1 JAN,jul *", "0 0 * * 7", "5/15 * * * *", "1-10/3 * * * *", "0 0 30 2 *",
		"@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually", "@HOURLY", "@every 1s", "@every 1h30m",
		"@every 90s", "@every 1.5h", "@every +5m",
		"", "   ", "* * * *", "* * * * * * *", "61 * * * *", "* 24 * * *", "* * 0 * *", "* * 32 * *", "* * * 13 *",
		"* * * * 8", "*/0 * * * *", "*/61 * * * *", "*,5 * * * *", "5-1 * * * *", "FRI-MON * * * *", "* * * * FRI-MON",
		"1,,2 * * * *", "0 0 L * *", "0 0 * * 5#3", "0 0 ? * *", "a * * * *", "-5 * * * *", "5- * * * *", "1/ * * * *",
		"1/x * * * *", "1-2-3 * * * *", "00001 * * * *", "@every", "@every 500ms", "@every 1.5s", "@every -1s", "@every 0",
		"@every 1x", "@every 1s 2s", "@daily 5", "@sometimes", "*/5,10 * * * *", "* * * JANUARY *",
	}
	for _, spec := range specs {
		var goMsg string
		if err := (pgsched.Recurring{Name: "x", Spec: spec}).Check(); err != nil {
			goMsg = strings.TrimPrefix(err.Error(), "invalid task: recurring schedule: spec: ")
		}
		var sqlMsg *string
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT "+b.db.Schema+".recurring_spec_error($1)", spec).Scan(&sqlMsg))
		got := ""
		if sqlMsg != nil {
			got = *sqlMsg
		}
		require.Equal(t, goMsg, got, "spec %q", spec)
	}
}

// TestRecurringBadInput: every invalid field is refused by SQL and by Go
// (before the round trip where Check can tell) with the same message naming
// it, and nothing is stored. A schedule's kind and payload are refused in
// the words schedule uses, as schedule would refuse them in every tick.
func TestRecurringBadInput(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	deep := func(depth int, open, close, inner string) json.RawMessage {
		return json.RawMessage(strings.Repeat(open, depth) + inner + strings.Repeat(close, depth))
	}
	good := pgsched.Recurring{Name: "a", Spec: "@daily"}
	with := func(f func(*pgsched.Recurring)) pgsched.Recurring { r := good; f(&r); return r }
	for _, tc := range []struct {
		name string
		r    pgsched.Recurring
		msg  string // after "recurring schedule: "
		// goOnly: SQL cannot be given it (not text or jsonb PostgreSQL
		// holds). server: only the server can tell (Check passes).
		// task: schedule refuses the same kind and payload in these words.
		goOnly, server, task bool
	}{
		{name: "no name", r: with(func(r *pgsched.Recurring) { r.Name = "" }), msg: "name is required"},
		{name: "long name", r: with(func(r *pgsched.Recurring) { r.Name = strings.Repeat("n", 256) }), msg: "name is 256 bytes, over the limit of 255"},
		{name: "NUL in name", r: with(func(r *pgsched.Recurring) { r.Name = "a\x00" }), goOnly: true, msg: "name contains a NUL byte"},
		{name: "name not UTF-8", r: with(func(r *pgsched.Recurring) { r.Name = "a\xff" }), goOnly: true, msg: "name is not valid UTF-8"},
		{name: "bad spec", r: with(func(r *pgsched.Recurring) { r.Spec = "61 * * * *" }), msg: `spec: minute field "61": value 61 out of range 0-59`},
		{name: "unknown zone", r: with(func(r *pgsched.Recurring) { r.TimeZone = "Mars/Olympus" }), msg: `time_zone "Mars/Olympus" is not an IANA time zone name`},
		{name: "Local", r: with(func(r *pgsched.Recurring) { r.TimeZone = "Local" }), msg: `time_zone "Local" is not an IANA time zone name`},
		{name: "posix zone", r: with(func(r *pgsched.Recurring) { r.TimeZone = "posix/Europe/Berlin" }), msg: `time_zone "posix/Europe/Berlin" is not an IANA time zone name`},
		{name: "right zone", r: with(func(r *pgsched.Recurring) { r.TimeZone = "right/UTC" }), msg: `time_zone "right/UTC" is not an IANA time zone name`},
		{name: "localtime", r: with(func(r *pgsched.Recurring) { r.TimeZone = "localtime" }), msg: `time_zone "localtime" is not an IANA time zone name`},
		{name: "zone in lowercase", r: with(func(r *pgsched.Recurring) { r.TimeZone = "europe/berlin" }), msg: `time_zone "europe/berlin" is not an IANA time zone name`},
		{name: "zone as a path", r: with(func(r *pgsched.Recurring) { r.TimeZone = "../etc/passwd" }), msg: `time_zone "../etc/passwd" is not an IANA time zone name`},
		{name: "zone with a newline", r: with(func(r *pgsched.Recurring) { r.TimeZone = "Europe/Berlin\n" }), msg: "time_zone contains a control character"},
		{name: "zone with NUL", r: with(func(r *pgsched.Recurring) { r.TimeZone = "UTC\x00" }), goOnly: true, msg: "time_zone contains a NUL byte"},
		{name: "bad policy", r: with(func(r *pgsched.Recurring) { r.Missed = "twice" }), msg: `missed must be skip, one or all, got "twice"`},
		{name: "kind with a tab", r: with(func(r *pgsched.Recurring) { r.Kind = "email\tsend" }), task: true, msg: "kind contains a control character"},
		{name: "kind with DEL", r: with(func(r *pgsched.Recurring) { r.Kind = "k\x7f" }), task: true, msg: "kind contains a control character"},
		{name: "long kind", r: with(func(r *pgsched.Recurring) { r.Kind = strings.Repeat("k", 300) }), task: true, msg: "kind is 300 bytes, over the limit of 255"},
		{name: "NUL in kind", r: with(func(r *pgsched.Recurring) { r.Kind = "k\x00" }), goOnly: true, msg: "kind contains a NUL byte"},
		{name: "payload 127 arrays deep", r: with(func(r *pgsched.Recurring) { r.Payload = deep(127, "[", "]", "") }), task: true,
			msg: "payload is nested more than 126 levels deep"},
		{name: "payload 127 objects deep", r: with(func(r *pgsched.Recurring) { r.Payload = deep(126, `{"k":`, "}", "{}") }), task: true,
			msg: "payload is nested more than 126 levels deep"},
		{name: "payload 127 deep, mixed, in a larger document", r: with(func(r *pgsched.Recurring) {
			r.Payload = json.RawMessage(`{"pad":"` + strings.Repeat("p", 5000) + `","deep":` + string(deep(63, `[{"a":1,"b":`, "}]", `"x"`)) + `}`)
		}), task: true, msg: "payload is nested more than 126 levels deep"},
		{name: "payload over the size limit", r: with(func(r *pgsched.Recurring) { r.Payload = json.RawMessage(`"` + strings.Repeat("a", 1<<20) + `"`) }),
			server: true, task: true, msg: "payload is 1048588 bytes as stored (jsonb), over the limit of 1048576 bytes"},
		{name: "payload not JSON", r: with(func(r *pgsched.Recurring) { r.Payload = json.RawMessage(`{nope`) }), goOnly: true,
			msg: "payload is not valid JSON (at byte 2: invalid character 'n' looking for beginning of object key string)"},
		{name: "payload with \\u0000", r: with(func(r *pgsched.Recurring) { r.Payload = json.RawMessage(`{"a":"x\u0000"}`) }), goOnly: true,
			msg: `payload has a \u0000 escape, which jsonb cannot store`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const prefix = "recurring schedule: "
			checkErr := tc.r.Check()
			if tc.server {
				require.NoError(t, checkErr, "only the server tells")
			} else {
				require.ErrorIs(t, checkErr, pgsched.ErrInvalidTask)
				require.Equal(t, "invalid task: "+prefix+tc.msg, checkErr.Error())
			}
			_, err := b.client.UpsertRecurring(ctx, tc.r)
			require.ErrorIs(t, err, pgsched.ErrInvalidTask)
			require.True(t, strings.HasSuffix(err.Error(), prefix+tc.msg), "Go: %v", err)
			if tc.goOnly {
				return
			}
			var payload *string
			if tc.r.Payload != nil {
				payload = ptr(string(tc.r.Payload))
			}
			_, err = b.db.Pool.Exec(ctx, "SELECT "+b.db.Schema+".recurring_upsert($1, $2, $3, $4::jsonb, $5, $6)",
				tc.r.Name, tc.r.Spec, tc.r.Kind, payload, tc.r.TimeZone, tc.r.Missed)
			var pgErr *pgconn.PgError
			require.True(t, errors.As(err, &pgErr), "%v", err)
			require.Equal(t, "PGS01", pgErr.Code)
			require.Equal(t, "pgsched: "+prefix+tc.msg, pgErr.Message)
			if tc.task {
				_, err = b.db.Pool.Exec(ctx, "SELECT "+b.db.Schema+".schedule('o', now() + interval '1 hour', '', $1::jsonb, $2)",
					payload, tc.r.Kind)
				require.True(t, errors.As(err, &pgErr), "%v", err)
				require.Equal(t, "PGS01", pgErr.Code)
				require.Equal(t, "pgsched: "+tc.msg, pgErr.Message, "schedule's words")
			}
		})
	}
	require.Equal(t, 0, countRows(t, b, "recurring_schedules"), "nothing stored")
	require.Equal(t, 0, countTasks(t, b), "nothing stored")
	// The deepest payload schedule takes, a schedule takes too.
	_, err := b.client.UpsertRecurring(ctx, with(func(r *pgsched.Recurring) { r.Payload = deep(126, "[", "]", "") }))
	require.NoError(t, err)
}

// TestRecurringZoneParity: SQL takes exactly the time zones Go's LoadZone
// takes, which are those of the zone database embedded in every worker:
// an upsert never accepts a zone that some worker could not load. Every
// name the server knows is tried (its posix/ and right/ copies included),
// and names that are tricky on one side or the other.
func TestRecurringZoneParity(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	tricky := []string{"UTC", "", "Europe/Berlin", "America/New_York", "America/Argentina/Buenos_Aires", "Etc/GMT+3", "Etc/GMT+5",
		"EST5EDT", "Japan", "GMT", "Factory", "CEST", "PST", "UTC+3", "Mars/Olympus", "Local", "localtime", "posixrules",
		"posix/Europe/Berlin", "right/UTC", "right/Europe/Berlin", "posix/UTC", "../etc/passwd", "/usr/share/zoneinfo/UTC",
		"Europe//Berlin", "Europe/./Berlin", "europe/berlin", "EUROPE/BERLIN", "Europe/Berlin ", " Europe/Berlin",
		"Europe/Berlin\n", "Europe/Berlin\x01", "Europe/Ber\x7flin", "Asia/Kolkata", "zone.tab", "tzdata.zi", "+VERSION"}
	rows, err := b.db.Pool.Query(ctx, "SELECT name FROM pg_timezone_names")
	require.NoError(t, err)
	names := tricky
	server := 0
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		names = append(names, n)
		server++
	}
	require.NoError(t, rows.Err())
	require.Greater(t, server, 400, "the server lists its zones")
	accepted := 0
	for _, tz := range names {
		goErr := (pgsched.Recurring{Name: "x", Spec: "@daily", TimeZone: tz}).Check()
		var sqlOK bool
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT "+b.db.Schema+".recurring_zone_ok(coalesce(nullif($1, ''), 'UTC'))", tz).Scan(&sqlOK))
		require.Equal(t, goErr == nil, sqlOK, "time zone %q: Go %v, SQL %v", tz, goErr, sqlOK)
		if goErr == nil {
			accepted++
		}
	}
	require.Greater(t, accepted, 400)
	// Through the whole upsert, each side refusing with the same words.
	for _, tz := range tricky {
		goErr := (pgsched.Recurring{Name: "x", Spec: "@daily", TimeZone: tz}).Check()
		_, sqlErr := b.db.Pool.Exec(ctx, "SELECT "+b.db.Schema+".recurring_upsert('zone-probe', '@daily', time_zone => $1)", tz)
		if goErr == nil {
			require.NoError(t, sqlErr, "time zone %q", tz)
			continue
		}
		require.ErrorContains(t, sqlErr, strings.TrimPrefix(goErr.Error(), "invalid task: "), "time zone %q", tz)
	}
	for _, tz := range []string{"Europe/Berlin\x00", "Europe/\xffBerlin"} {
		// Not text PostgreSQL can hold: Go refuses it naming the field.
		require.ErrorContains(t, (pgsched.Recurring{Name: "x", Spec: "@daily", TimeZone: tz}).Check(), "time_zone")
	}
}
