package pgsched_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
)

// sqlTime is at as a timestamptz literal; the zero time as pgx sends it.
func sqlTime(at time.Time) *string { return ptr(at.UTC().Format("2006-01-02 15:04:05.999999Z07:00")) }

// TestBadKeyInput: Cancel, CancelRunning and Reschedule refuse a key no
// task can have, and Reschedule a new time no task can have, naming the
// field with the same words from Go and from SQL (cancel, cancel_running,
// reschedule) rather than "no pending task". Where PostgreSQL refuses the
// value at input, the Go client names the field and psql users get
// PostgreSQL's own error. The task in line stays as it was.
func TestBadKeyInput(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	future := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	good := pgsched.Task{OrderingID: "o", ScheduledAt: future}
	_, err := b.client.Schedule(ctx, good)
	require.NoError(t, err)
	year := func(y int) time.Time { return time.Date(y, 6, 1, 0, 0, 0, 0, time.UTC) }
	const (
		outOfRange = "is outside the supported range 0001-01-01 00:00:00 to 9999-12-31 23:59:59.999999 UTC"
		zeroTime   = "is required: 0001-01-01 00:00:00 UTC is Go's zero time, taken as unset"
	)
	key := func(o string, at time.Time, uk string) *pgsched.Key {
		return &pgsched.Key{OrderingID: o, ScheduledAt: at, UniquenessKey: uk}
	}

	type op struct {
		name   string
		viaGo  func(k pgsched.Key) error
		viaSQL func(k sqlKey) error
	}
	sqlCall := func(fn string, extra ...any) func(k sqlKey) error {
		return func(k sqlKey) error {
			q := "SELECT " + b.db.Schema + "." + fn + "($1, $2::timestamptz, $3"
			args := []any{k.o, k.at, k.uk}
			if len(extra) > 0 {
				q += ", $4::timestamptz"
				args = append(args, extra...)
			}
			_, err := b.db.Pool.Exec(ctx, q+")", args...)
			return err
		}
	}
	newAt := future.Add(time.Hour)
	ops := []op{
		{"cancel", func(k pgsched.Key) error { return b.client.Cancel(ctx, k) }, sqlCall("cancel")},
		{"cancel_running", func(k pgsched.Key) error { _, err := b.client.CancelRunning(ctx, k); return err }, sqlCall("cancel_running")},
		{"reschedule", func(k pgsched.Key) error { return b.client.Reschedule(ctx, k, newAt) }, sqlCall("reschedule", *sqlTime(newAt))},
	}

	for _, tc := range []struct {
		name   string
		key    *pgsched.Key // the Go input; nil for one only SQL can pass
		sql    *sqlKey      // the SQL input: key's unless set
		pgCode string       // SQLSTATE of PostgreSQL's input error, if it refuses the value
		msg    string
	}{
		{name: "empty ordering_id", key: key("", future, ""), msg: "ordering_id is required"},
		{name: "NULL ordering_id", sql: &sqlKey{at: sqlTime(future), uk: ptr("")}, msg: "ordering_id is required"},
		{name: "long ordering_id", key: key(strings.Repeat("x", 256), future, ""), msg: "ordering_id is 256 bytes, over the limit of 255"},
		{name: "long uniqueness_key", key: key("o", future, strings.Repeat("é", 128)), msg: "uniqueness_key is 256 bytes, over the limit of 255"},
		{name: "Go's zero time", key: key("o", time.Time{}, ""), msg: "scheduled_at " + zeroTime},
		{name: "NULL scheduled_at", sql: &sqlKey{o: ptr("o"), uk: ptr("")}, msg: "scheduled_at is required"},
		{name: "infinity", sql: &sqlKey{o: ptr("o"), at: ptr("infinity"), uk: ptr("")}, msg: "scheduled_at must be a finite time"},
		{name: "-infinity", sql: &sqlKey{o: ptr("o"), at: ptr("-infinity"), uk: ptr("")}, msg: "scheduled_at must be a finite time"},
		{name: "year 10000", key: key("o", year(10000), ""), msg: "scheduled_at " + outOfRange},
		{name: "4000 BC", sql: &sqlKey{o: ptr("o"), at: ptr("4000-01-01 00:00:00+00 BC"), uk: ptr("")}, msg: "scheduled_at " + outOfRange},
		{name: "year 294277", key: key("o", year(294277), ""), pgCode: "22008", msg: "scheduled_at " + outOfRange},
		{name: "NUL in ordering_id", key: key("o\x00", future, ""), pgCode: "22021", msg: "ordering_id contains a NUL byte"},
		{name: "non-UTF-8 uniqueness_key", key: key("o", future, "\xff"), pgCode: "22021", msg: "uniqueness_key is not valid UTF-8"},
	} {
		for _, o := range ops {
			t.Run(o.name+"/"+tc.name, func(t *testing.T) {
				var goMsg string
				if tc.key != nil {
					err := o.viaGo(*tc.key)
					require.ErrorIs(t, err, pgsched.ErrInvalidTask)
					goMsg = reason(err)
					require.Equal(t, tc.msg, goMsg)
				}
				sk := tc.sql
				if sk == nil {
					sk = &sqlKey{o: ptr(tc.key.OrderingID), at: sqlTime(tc.key.ScheduledAt), uk: ptr(tc.key.UniquenessKey)}
				}
				err := o.viaSQL(*sk)
				if tc.pgCode != "" {
					require.Equal(t, tc.pgCode, sqlState(err), "PostgreSQL refuses it at input: %v", err)
					return
				}
				require.Equal(t, "PGS01", sqlState(err), "SQLSTATE of %v", err)
				require.Equal(t, tc.msg, reason(err))
				if tc.key != nil {
					require.Equal(t, goMsg, reason(err), "the same message from Go and SQL")
				}
			})
		}
	}

	for _, tc := range []struct {
		name   string
		at     *time.Time // the Go input; nil for one only SQL can pass
		sql    *string    // the SQL input: at's unless set
		pgCode string
		msg    string
	}{
		{name: "Go's zero time", at: &time.Time{}, msg: "new_scheduled_at " + zeroTime},
		{name: "NULL", msg: "new_scheduled_at is required"},
		{name: "infinity", sql: ptr("infinity"), msg: "new_scheduled_at must be a finite time"},
		{name: "-infinity", sql: ptr("-infinity"), msg: "new_scheduled_at must be a finite time"},
		{name: "year 10000", at: ptr2time(year(10000)), msg: "new_scheduled_at " + outOfRange},
		{name: "year 294277", at: ptr2time(year(294277)), pgCode: "22008", msg: "new_scheduled_at " + outOfRange},
	} {
		t.Run("reschedule to/"+tc.name, func(t *testing.T) {
			var goMsg string
			sqlAt := tc.sql
			if tc.at != nil {
				err := b.client.Reschedule(ctx, good.Key(), *tc.at)
				require.ErrorIs(t, err, pgsched.ErrInvalidTask)
				goMsg = reason(err)
				require.Equal(t, tc.msg, goMsg)
				sqlAt = sqlTime(*tc.at)
			}
			_, err := b.db.Pool.Exec(ctx, "SELECT "+b.db.Schema+".reschedule($1, $2, '', $3::timestamptz)", good.OrderingID, good.ScheduledAt, sqlAt)
			if tc.pgCode != "" {
				require.Equal(t, tc.pgCode, sqlState(err), "PostgreSQL refuses it at input: %v", err)
				return
			}
			require.Equal(t, "PGS01", sqlState(err), "SQLSTATE of %v", err)
			require.Equal(t, tc.msg, reason(err))
			if tc.at != nil {
				require.Equal(t, goMsg, reason(err), "the same message from Go and SQL")
			}
		})
	}
	t.Cleanup(func() {
		var at time.Time
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT scheduled_at FROM "+b.db.Schema+".tasks").Scan(&at))
		require.True(t, at.Equal(good.ScheduledAt), "the task did not move")
	})
}

func ptr2time(t time.Time) *time.Time { return &t }

// TestBadOperatorInput: the operator calls refuse what PostgreSQL would
// refuse at input (NUL bytes, invalid UTF-8, times beyond its range: psql
// users get PostgreSQL's own error there) with an ErrInvalidTask naming
// the field, and a recurring schedule's kind and payload with the words
// recurring_upsert uses where it can see them; nothing changes.
func TestBadOperatorInput(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	killTask(t, b, "dead-1", "")
	exec := func(q string, args ...any) error {
		_, err := b.db.Pool.Exec(ctx, strings.ReplaceAll(q, "pgsched.", b.db.Schema+"."), args...)
		return err
	}
	year := func(y int) time.Time { return time.Date(y, 6, 1, 0, 0, 0, 0, time.UTC) }
	const outsidePostgres = "is outside PostgreSQL's range 4713-11-24 BC to 294276-12-31 UTC"

	for _, tc := range []struct {
		name   string
		viaGo  func() error
		msg    string // Go's, after the sentinel
		viaSQL func() error
		// pgCode: PostgreSQL's SQLSTATE for the same input from SQL; ""
		// when SQL answers PGS01 with msg itself.
		pgCode string
	}{
		{"PauseKind NUL", func() error { _, err := b.client.PauseKind(ctx, "k\x00"); return err }, "kind contains a NUL byte",
			func() error { return exec("SELECT pgsched.pause_kind($1)", "k\x00") }, "22021"},
		{"ResumeKind non-UTF-8", func() error { _, err := b.client.ResumeKind(ctx, "k\xff"); return err }, "kind is not valid UTF-8",
			func() error { return exec("SELECT pgsched.resume_kind($1)", "k\xff") }, "22021"},
		{"RetryDeadWhere kind NUL", func() error { _, err := b.client.RetryDeadWhere(ctx, pgsched.DeadFilter{Kind: "k\x00"}); return err },
			"kind contains a NUL byte", func() error { return exec("SELECT pgsched.retry_dead_where(kind => $1)", "k\x00") }, "22021"},
		{"DeleteDeadWhere ordering_id non-UTF-8", func() error {
			_, err := b.client.DeleteDeadWhere(ctx, pgsched.DeadFilter{OrderingID: "dead-\xff"})
			return err
		}, "ordering_id is not valid UTF-8", func() error { return exec("SELECT pgsched.delete_dead_where(ordering_id => $1)", "dead-\xff") }, "22021"},
		// pgx wraps a time this far out round to another date: the filter
		// would select other dead tasks than asked.
		{"DeleteDeadWhere died_before beyond PostgreSQL", func() error {
			_, err := b.client.DeleteDeadWhere(ctx, pgsched.DeadFilter{DiedBefore: year(600000)})
			return err
		}, "died_before " + outsidePostgres, func() error {
			return exec("SELECT pgsched.delete_dead_where(died_before => $1::timestamptz)", "600000-06-01 00:00:00Z")
		}, "22008"},
		{"RetryDeadWhere died_after beyond PostgreSQL", func() error {
			_, err := b.client.RetryDeadWhere(ctx, pgsched.DeadFilter{DiedAfter: year(-5000)})
			return err
		}, "died_after " + outsidePostgres, func() error {
			return exec("SELECT pgsched.retry_dead_where(died_after => $1::timestamptz)", "5001-06-01 00:00:00Z BC")
		}, "22008"},
		{"UpsertRecurring name NUL", func() error {
			_, err := b.client.UpsertRecurring(ctx, pgsched.Recurring{Name: "r\x00", Spec: "@daily"})
			return err
		}, "recurring schedule: name contains a NUL byte", func() error { return exec("SELECT pgsched.recurring_upsert($1, '@daily')", "r\x00") }, "22021"},
		{"UpsertRecurring kind control character", func() error {
			_, err := b.client.UpsertRecurring(ctx, pgsched.Recurring{Name: "r", Spec: "@daily", Kind: "k\tx"})
			return err
		}, "recurring schedule: kind contains a control character", func() error {
			return exec("SELECT pgsched.recurring_upsert('r', '@daily', $1)", "k\tx")
		}, ""},
		{"UpsertRecurring payload NaN", func() error {
			_, err := b.client.UpsertRecurring(ctx, pgsched.Recurring{Name: "r", Spec: "@daily", Payload: json.RawMessage(`{"x":NaN}`)})
			return err
		}, "recurring schedule: payload is not valid JSON (at byte 6: invalid character 'N' looking for beginning of value)", func() error {
			return exec("SELECT pgsched.recurring_upsert('r', '@daily', 'k', $1::text::jsonb)", `{"x":NaN}`)
		}, "22P02"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.viaGo()
			require.ErrorIs(t, err, pgsched.ErrInvalidTask)
			require.Equal(t, tc.msg, reason(err))
			err = tc.viaSQL()
			if tc.pgCode != "" {
				require.Equal(t, tc.pgCode, sqlState(err), "PostgreSQL refuses it at input: %v", err)
				return
			}
			require.Equal(t, "PGS01", sqlState(err), "%v", err)
			require.Equal(t, tc.msg, reason(err), "the same message from Go and SQL")
		})
	}
	require.Equal(t, 1, countRows(t, b, "dead_tasks"), "no dead task retried or deleted")
	require.Equal(t, 0, countRows(t, b, "paused_kinds"))
	require.Equal(t, 0, countRows(t, b, "recurring_schedules"))
}
