package pgsched_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/metrics"
	"github.com/pgsched/pgsched/internal/sqlschema"
	"github.com/pgsched/pgsched/internal/webhook"
)

// sqlTask is a task as a SQL caller passes it: nil is NULL, times are
// timestamptz literals, so SQL-only values (infinity, BC) can be written.
type sqlTask struct {
	o, at, uk, pl, kind, gk *string
	priority                int32
}

func ptr(s string) *string { return &s }

// asSQL is t as psql would pass it; the zero time as pgx sends it, which
// is 0001-01-01 00:00:00 UTC.
func asSQL(t pgsched.Task) sqlTask {
	st := sqlTask{o: ptr(t.OrderingID), uk: ptr(t.UniquenessKey), kind: ptr(t.Kind), priority: t.Priority}
	if t.GroupKey != "" {
		st.gk = ptr(t.GroupKey)
	}
	st.at = ptr(t.ScheduledAt.UTC().Format("2006-01-02 15:04:05.999999Z07:00"))
	if t.Payload != nil {
		st.pl = ptr(string(t.Payload))
	}
	return st
}

// reason is an error's text after its prefixes and sentinel: what Go and
// SQL must agree on. SQL messages start with the schema's name (the
// migrator writes it for "pgsched" everywhere), Go's with "pgsched".
func reason(err error) string {
	msg := err.Error()
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		msg = pgErr.Message
	}
	// After the operation ("pgsched: cancel: ") and the sentinel.
	for _, s := range []error{pgsched.ErrInvalidTask, pgsched.ErrInPast} {
		if _, after, ok := strings.Cut(msg, s.Error()+": "); ok {
			msg = after
			break
		}
	}
	msg = strings.TrimPrefix(msg, "pgsched: ")
	if name, rest, ok := strings.Cut(msg, ": "); ok && strings.HasPrefix(name, "t_") && !strings.Contains(name, " ") {
		msg = rest // a test schema's name
	}
	return msg
}

func sqlSchedule(b clientBundle, t sqlTask) error {
	_, err := b.db.Pool.Exec(context.Background(),
		"SELECT "+b.db.Schema+".schedule($1, $2::timestamptz, $3, $4::jsonb, $5, group_key => $6, priority => $7)",
		t.o, t.at, t.uk, t.pl, t.kind, t.gk, t.priority)
	return err
}

func sqlScheduleMany(b clientBundle, ts []sqlTask) error {
	var o, at, uk, pl, kind, gk []*string
	var pr []int32
	for _, t := range ts {
		o, at, uk, pl, kind = append(o, t.o), append(at, t.at), append(uk, t.uk), append(pl, t.pl), append(kind, t.kind)
		gk, pr = append(gk, t.gk), append(pr, t.priority)
	}
	_, err := b.db.Pool.Exec(context.Background(),
		"SELECT "+b.db.Schema+".schedule_many($1::text[], $2::text[]::timestamptz[], $3::text[], $4::text[]::jsonb[], $5::text[], "+
			"group_keys => $6::text[], priorities => $7::integer[])",
		o, at, uk, pl, kind, gk, pr)
	return err
}

func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

func nested(depth int, open, close, inner string) json.RawMessage {
	return json.RawMessage(strings.Repeat(open, depth) + inner + strings.Repeat(close, depth))
}

func countTasks(t *testing.T, b clientBundle) int {
	t.Helper()
	return countRows(t, b, "heads") + countRows(t, b, "backlog")
}

// TestBadInput sends every kind of bad task through the Go client
// (Schedule and ScheduleMany) and through the SQL API (schedule and
// schedule_many, as psql would): each is refused with the sentinel or
// SQLSTATE of its kind, a message naming the field, the same message both
// ways where SQL can express the input, and nothing stored. Then the inputs
// that are not tasks: schema names, kinds as metric labels, webhook routes.
func TestBadInput(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	future := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	good := pgsched.Task{OrderingID: "o", ScheduledAt: future}
	with := func(f func(*pgsched.Task)) pgsched.Task { t := good; f(&t); return t }
	year := func(y int) time.Time { return time.Date(y, 6, 1, 0, 0, 0, 0, time.UTC) }
	const outOfRange = "scheduled_at is outside the supported range 0001-01-01 00:00:00 to 9999-12-31 23:59:59.999999 UTC"
	const zeroTime = "scheduled_at is required: 0001-01-01 00:00:00 UTC is Go's zero time, taken as unset"

	cases := []struct {
		name string
		// task is the Go input; nil for an input only SQL can pass.
		task *pgsched.Task
		// sql is the SQL input: asSQL(*task) unless set.
		sql *sqlTask
		// pgCode, for a value PostgreSQL refuses at input, before any
		// function could name the field (psql users see PostgreSQL's own
		// error): the SQLSTATE it answers. The Go client names the field.
		pgCode string
		want   error  // sentinel; SQLSTATE PGS01 for ErrInvalidTask, PGS02 for ErrInPast
		field  string // named by the message
		msg    string // the message after "pgsched: ", when it is fixed
	}{
		{name: "empty ordering_id", task: ptr2(with(func(t *pgsched.Task) { t.OrderingID = "" })), field: "ordering_id", msg: "ordering_id is required"},
		{name: "NULL ordering_id", sql: &sqlTask{at: ptr("2999-01-01 00:00:00Z")}, field: "ordering_id", msg: "ordering_id is required"},
		{name: "long ordering_id", task: ptr2(with(func(t *pgsched.Task) { t.OrderingID = strings.Repeat("x", 256) })), field: "ordering_id", msg: "ordering_id is 256 bytes, over the limit of 255"},
		{name: "non-UTF-8 ordering_id", task: ptr2(with(func(t *pgsched.Task) { t.OrderingID = "a\xffb" })), pgCode: "22021", field: "ordering_id", msg: "ordering_id is not valid UTF-8"},
		{name: "NUL in ordering_id", task: ptr2(with(func(t *pgsched.Task) { t.OrderingID = "a\x00b" })), pgCode: "22021", field: "ordering_id", msg: "ordering_id contains a NUL byte"},
		{name: "long uniqueness_key", task: ptr2(with(func(t *pgsched.Task) { t.UniquenessKey = strings.Repeat("é", 128) })), field: "uniqueness_key", msg: "uniqueness_key is 256 bytes, over the limit of 255"},
		{name: "non-UTF-8 uniqueness_key", task: ptr2(with(func(t *pgsched.Task) { t.UniquenessKey = "\xc3\x28" })), pgCode: "22021", field: "uniqueness_key", msg: "uniqueness_key is not valid UTF-8"},
		{name: "missing scheduled_at: Go's zero time", task: ptr2(with(func(t *pgsched.Task) { t.ScheduledAt = time.Time{} })), field: "scheduled_at", msg: zeroTime},
		{name: "Go's zero time in another zone", task: ptr2(with(func(t *pgsched.Task) { t.ScheduledAt = time.Time{}.In(time.FixedZone("X", 3600)) })), field: "scheduled_at", msg: zeroTime},
		{name: "NULL scheduled_at", sql: &sqlTask{o: ptr("o")}, field: "scheduled_at", msg: "scheduled_at is required"},
		{name: "infinity", sql: &sqlTask{o: ptr("o"), at: ptr("infinity")}, field: "scheduled_at", msg: "scheduled_at must be a finite time"},
		{name: "-infinity", sql: &sqlTask{o: ptr("o"), at: ptr("-infinity")}, field: "scheduled_at", msg: "scheduled_at must be a finite time"},
		{name: "year 10000", task: ptr2(with(func(t *pgsched.Task) { t.ScheduledAt = year(10000) })), field: "scheduled_at", msg: outOfRange},
		{name: "just past 9999", task: ptr2(with(func(t *pgsched.Task) { t.ScheduledAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) })), field: "scheduled_at", msg: outOfRange},
		{name: "year 294277, beyond PostgreSQL", task: ptr2(with(func(t *pgsched.Task) { t.ScheduledAt = year(294277) })), pgCode: "22008", field: "scheduled_at", msg: outOfRange},
		{name: "year 586584, beyond pgx", task: ptr2(with(func(t *pgsched.Task) { t.ScheduledAt = year(586584) })), pgCode: "22008", field: "scheduled_at", msg: outOfRange},
		{name: "year 0", task: ptr2(with(func(t *pgsched.Task) { t.ScheduledAt = year(0) })), sql: &sqlTask{o: ptr("o"), at: ptr("0001-06-01 00:00:00+00 BC")}, field: "scheduled_at", msg: outOfRange},
		{name: "4000 BC", sql: &sqlTask{o: ptr("o"), at: ptr("4000-01-01 00:00:00+00 BC")}, field: "scheduled_at", msg: outOfRange},
		{name: "past", task: ptr2(with(func(t *pgsched.Task) { t.ScheduledAt = time.Now().Add(-time.Hour) })), want: pgsched.ErrInPast, field: "scheduled_at"},
		{name: "year 1, past", task: ptr2(with(func(t *pgsched.Task) { t.ScheduledAt = year(1) })), want: pgsched.ErrInPast, field: "scheduled_at"},
		{name: "kind with a tab", task: ptr2(with(func(t *pgsched.Task) { t.Kind = "email\tsend" })), field: "kind", msg: "kind contains a control character"},
		{name: "kind with a newline", task: ptr2(with(func(t *pgsched.Task) { t.Kind = "email\r\nX-Injected: 1" })), field: "kind", msg: "kind contains a control character"},
		{name: "kind with DEL", task: ptr2(with(func(t *pgsched.Task) { t.Kind = "k\x7f" })), field: "kind", msg: "kind contains a control character"},
		{name: "long kind", task: ptr2(with(func(t *pgsched.Task) { t.Kind = strings.Repeat("k", 300) })), field: "kind", msg: "kind is 300 bytes, over the limit of 255"},
		{name: "NUL in kind", task: ptr2(with(func(t *pgsched.Task) { t.Kind = "k\x00" })), pgCode: "22021", field: "kind", msg: "kind contains a NUL byte"},
		{name: "group_key with a newline", task: ptr2(with(func(t *pgsched.Task) { t.GroupKey, t.Priority = "tenant\n7", 5 })), field: "group_key", msg: "group_key contains a control character"},
		{name: "long group_key", task: ptr2(with(func(t *pgsched.Task) { t.GroupKey = strings.Repeat("g", 256) })), field: "group_key", msg: "group_key is 256 bytes, over the limit of 255"},
		{name: "NUL in group_key", task: ptr2(with(func(t *pgsched.Task) { t.GroupKey = "g\x00" })), pgCode: "22021", field: "group_key", msg: "group_key contains a NUL byte"},
		{name: "non-UTF-8 group_key", task: ptr2(with(func(t *pgsched.Task) { t.GroupKey = "g\xff" })), pgCode: "22021", field: "group_key", msg: "group_key is not valid UTF-8"},
		{name: "payload not JSON", task: ptr2(with(func(t *pgsched.Task) { t.Payload = json.RawMessage(`{nope`) })), pgCode: "22P02", field: "payload",
			msg: "payload is not valid JSON (at byte 2: invalid character 'n' looking for beginning of object key string)"},
		{name: "payload with NaN", task: ptr2(with(func(t *pgsched.Task) { t.Payload = json.RawMessage(`{"a":NaN}`) })), pgCode: "22P02", field: "payload",
			msg: "payload is not valid JSON (at byte 6: invalid character 'N' looking for beginning of value)"},
		{name: "payload with Infinity", task: ptr2(with(func(t *pgsched.Task) { t.Payload = json.RawMessage(`[1,-Infinity]`) })), pgCode: "22P02", field: "payload",
			msg: "payload is not valid JSON (at byte 5: invalid character 'I' in numeric literal)"},
		{name: "payload not UTF-8", task: ptr2(with(func(t *pgsched.Task) { t.Payload = json.RawMessage("\"\xff\"") })), pgCode: "22021", field: "payload", msg: "payload is not valid UTF-8"},
		{name: "payload with \\u0000", task: ptr2(with(func(t *pgsched.Task) { t.Payload = json.RawMessage(`{"a":"x\u0000"}`) })), pgCode: "22P05", field: "payload", msg: `payload has a \u0000 escape, which jsonb cannot store`},
		{name: "payload with a lone surrogate", task: ptr2(with(func(t *pgsched.Task) { t.Payload = json.RawMessage(`["\ud800"]`) })), pgCode: "22P02", field: "payload", msg: "payload has an unpaired UTF-16 surrogate escape, which jsonb cannot store"},
		{name: "payload number too large", task: ptr2(with(func(t *pgsched.Task) { t.Payload = json.RawMessage(`{"n":1e131072}`) })), pgCode: "22003", field: "payload", msg: "payload has a number outside PostgreSQL's numeric range"},
		{name: "payload number too precise", task: ptr2(with(func(t *pgsched.Task) { t.Payload = json.RawMessage(`[0e-16384]`) })), pgCode: "22003", field: "payload", msg: "payload has a number outside PostgreSQL's numeric range"},
		{name: "payload over the size limit", task: ptr2(with(func(t *pgsched.Task) { t.Payload = json.RawMessage(`"` + strings.Repeat("a", 1<<20) + `"`) })),
			field: "payload", msg: "payload is 1048588 bytes as stored (jsonb), over the limit of 1048576 bytes"},
		{name: "payload of numbers over the size limit as stored", task: ptr2(with(func(t *pgsched.Task) { t.Payload = json.RawMessage("[" + strings.Repeat("1,", 200_000) + "1]") })),
			field: "payload", msg: "payload is 2400020 bytes as stored (jsonb), over the limit of 1048576 bytes"},
		{name: "payload 127 arrays deep", task: ptr2(with(func(t *pgsched.Task) { t.Payload = nested(127, "[", "]", "") })), field: "payload", msg: "payload is nested more than 126 levels deep"},
		{name: "payload 127 objects deep", task: ptr2(with(func(t *pgsched.Task) { t.Payload = nested(126, `{"k":`, "}", "{}") })), field: "payload", msg: "payload is nested more than 126 levels deep"},
		{name: "payload 127 deep, mixed, in a larger document", task: ptr2(with(func(t *pgsched.Task) {
			t.Payload = json.RawMessage(`{"pad":"` + strings.Repeat("p", 5000) + `","deep":` + string(nested(63, `[{"a":1,"b":`, "}]", `"x"`)) + `}`)
		})), field: "payload", msg: "payload is nested more than 126 levels deep"},
		{name: "payload 20000 deep", task: ptr2(with(func(t *pgsched.Task) { t.Payload = nested(20000, "[", "]", "1") })), pgCode: "54001", field: "payload", msg: "payload is nested more than 126 levels deep"},
	}
	for _, tc := range cases {
		want := tc.want
		if want == nil {
			want = pgsched.ErrInvalidTask
		}
		code := map[error]string{pgsched.ErrInvalidTask: "PGS01", pgsched.ErrInPast: "PGS02"}[want]
		t.Run(tc.name, func(t *testing.T) {
			var goMsg, goBatchMsg string
			if tc.task != nil {
				_, err := b.client.Schedule(ctx, *tc.task)
				require.ErrorIs(t, err, want)
				require.Contains(t, err.Error(), tc.field)
				goMsg = reason(err)
				if tc.msg != "" {
					require.Equal(t, tc.msg, goMsg)
				}

				batch := make([]pgsched.Task, 50)
				for i := range batch {
					batch[i] = pgsched.Task{OrderingID: fmt.Sprintf("b%d", i), ScheduledAt: future}
				}
				batch[37] = *tc.task
				_, err = b.client.ScheduleMany(ctx, batch)
				require.ErrorIs(t, err, want)
				require.Contains(t, err.Error(), tc.field)
				require.Contains(t, err.Error(), "(batch item 38)")
				goBatchMsg = reason(err)
			}
			require.Equal(t, 0, countTasks(t, b), "nothing stored")

			st := tc.sql
			if st == nil {
				s := asSQL(*tc.task)
				st = &s
			}
			err := sqlSchedule(b, *st)
			require.Error(t, err)
			if tc.pgCode != "" {
				require.Equal(t, tc.pgCode, sqlState(err), "PostgreSQL refuses it at input: %v", err)
				require.Equal(t, 0, countTasks(t, b), "nothing stored")
				return
			}
			require.Equal(t, code, sqlState(err), "SQLSTATE of %v", err)
			require.Contains(t, err.Error(), tc.field)
			if tc.msg != "" {
				require.Equal(t, tc.msg, reason(err))
			}
			if tc.task != nil {
				require.Equal(t, goMsg, reason(err), "the same message from Go and SQL")
			}

			batch := make([]sqlTask, 50)
			for i := range batch {
				batch[i] = sqlTask{o: ptr(fmt.Sprintf("b%d", i)), at: ptr(future.UTC().Format(time.RFC3339Nano))}
			}
			batch[37] = *st
			err = sqlScheduleMany(b, batch)
			require.Equal(t, code, sqlState(err), "SQLSTATE of %v", err)
			require.Contains(t, err.Error(), "(batch item 38)")
			if tc.task != nil {
				require.Equal(t, goBatchMsg, reason(err), "the same batch message from Go and SQL")
			}
			require.Equal(t, 0, countTasks(t, b), "nothing stored")
		})
	}

	t.Run("cancel and reschedule", func(t *testing.T) {
		far := year(294277)
		err := b.client.Cancel(ctx, pgsched.Key{OrderingID: "o", ScheduledAt: far})
		require.ErrorIs(t, err, pgsched.ErrInvalidTask)
		require.Equal(t, outOfRange, reason(err))
		err = b.client.Reschedule(ctx, pgsched.Key{OrderingID: "o", ScheduledAt: year(586584)}, future)
		require.ErrorIs(t, err, pgsched.ErrInvalidTask)
		require.Equal(t, outOfRange, reason(err))
		err = b.client.Reschedule(ctx, pgsched.Key{OrderingID: "o\xff", ScheduledAt: future}, future)
		require.ErrorIs(t, err, pgsched.ErrInvalidTask)
		require.Contains(t, err.Error(), "ordering_id")

		const newOutOfRange = "new_scheduled_at is outside the supported range 0001-01-01 00:00:00 to 9999-12-31 23:59:59.999999 UTC"
		_, err = b.client.Schedule(ctx, good)
		require.NoError(t, err)
		for _, at := range []time.Time{year(10000), year(294277), year(586584)} {
			err = b.client.Reschedule(ctx, good.Key(), at)
			require.ErrorIs(t, err, pgsched.ErrInvalidTask)
			require.Equal(t, newOutOfRange, reason(err))
		}
		_, err = b.db.Pool.Exec(ctx, "SELECT "+b.db.Schema+".reschedule($1, $2, '', '10000-06-01 00:00:00Z')", good.OrderingID, good.ScheduledAt)
		require.Equal(t, "PGS01", sqlState(err))
		require.Equal(t, newOutOfRange, reason(err))
		var at time.Time
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT scheduled_at FROM "+b.db.Schema+".tasks").Scan(&at))
		require.True(t, at.Equal(good.ScheduledAt), "the task did not move")
		require.NoError(t, b.client.Cancel(ctx, good.Key()))
		require.Equal(t, 0, countTasks(t, b))
	})

	t.Run("schema names", func(t *testing.T) {
		pool := b.db.Pool
		for name, why := range map[string]string{
			"select": "keyword", "order": "keyword", "between": "keyword", "is": "keyword",
			"public": "of its own", "information_schema": "of its own", "pg_catalog": "pg_", "pg_mine": "pg_",
			"Pgsched": "lowercase", "a-b": "lowercase",
		} {
			for what, err := range map[string]error{
				"Validate":  sqlschema.Validate(name),
				"NewClient": second(pgsched.NewClient(pool, pgsched.ClientConfig{Schema: name})),
			} {
				require.ErrorIs(t, err, sqlschema.ErrInvalidName, "%s(%q)", what, name)
				require.Contains(t, err.Error(), "schema name", "%s(%q) names the field", what, name)
				require.Contains(t, err.Error(), fmt.Sprintf("%q", name))
				require.Contains(t, err.Error(), why, "%s(%q) says why", what, name)
			}
		}
		// The embedded keyword list covers this server's: every keyword
		// that is not unreserved is refused, and the unreserved ones work.
		rows, err := pool.Query(ctx, "SELECT word, catcode FROM pg_get_keywords()")
		require.NoError(t, err)
		n := 0
		for rows.Next() {
			var word, cat string
			require.NoError(t, rows.Scan(&word, &cat))
			err := sqlschema.Validate(word)
			if cat == "U" {
				require.NoError(t, err, "unreserved keyword %q", word)
			} else {
				require.ErrorIs(t, err, sqlschema.ErrInvalidName, "keyword %q (%s)", word, cat)
				n++
			}
		}
		require.NoError(t, rows.Err())
		require.Greater(t, n, 100)
	})

	t.Run("kinds as metric labels", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m, err := metrics.New(reg)
		require.NoError(t, err)
		for i := range 10_000 {
			kind := fmt.Sprintf("kind-%d", i)
			m.Executed.WithLabelValues(kind, "completed").Inc()
			m.Duration.WithLabelValues(kind).Observe(0.001)
		}
		families, err := reg.Gather()
		require.NoError(t, err)
		series := map[string]int{}
		for _, f := range families {
			series[f.GetName()] = len(f.GetMetric())
		}
		require.Equal(t, metrics.MaxKinds+1, series["pgsched_tasks_executed_total"], "10k kinds: the first ones and _other")
		require.Equal(t, metrics.MaxKinds+1, series["pgsched_task_run_duration_seconds"])
	})

	t.Run("webhook routes", func(t *testing.T) {
		_, err := webhook.ParseRoutes("a=https://user:s3cret@hooks.example/a, b=ftp://user:s3cret@hooks.example/b")
		require.Error(t, err)
		require.NotContains(t, err.Error(), "s3cret")
		require.NotContains(t, err.Error(), "user", "no credentials, not even the user")
		require.Contains(t, err.Error(), "ftp://hooks.example", "the URL as scheme and host")
		r, err := webhook.ParseRoutes("b=https://user:s3cret@hooks.example/b,a=http://hooks.example/a")
		require.NoError(t, err)
		require.Equal(t, "a=http://hooks.example,b=https://hooks.example", r.String(), "scheme and host only")
	})
}

func ptr2(t pgsched.Task) *pgsched.Task { return &t }

func second[T any](_ T, err error) error { return err }

// sqlKey is a key as a SQL caller passes it: nil is NULL.
type sqlKey struct{ o, at, uk *string }
