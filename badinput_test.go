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
	o, at, uk, pl, kind *string
}

func ptr(s string) *string { return &s }

// asSQL is t as psql would pass it; the zero time as pgx sends it, which
// is 0001-01-01 00:00:00 UTC.
func asSQL(t pgsched.Task) sqlTask {
	st := sqlTask{o: ptr(t.OrderingID), uk: ptr(t.UniquenessKey), kind: ptr(t.Kind)}
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
		"SELECT "+b.db.Schema+".schedule($1, $2::timestamptz, $3, $4::jsonb, $5)", t.o, t.at, t.uk, t.pl, t.kind)
	return err
}

func sqlScheduleMany(b clientBundle, ts []sqlTask) error {
	var o, at, uk, pl, kind []*string
	for _, t := range ts {
		o, at, uk, pl, kind = append(o, t.o), append(at, t.at), append(uk, t.uk), append(pl, t.pl), append(kind, t.kind)
	}
	_, err := b.db.Pool.Exec(context.Background(),
		"SELECT "+b.db.Schema+".schedule_many($1::text[], $2::text[]::timestamptz[], $3::text[], $4::text[]::jsonb[], $5::text[])",
		o, at, uk, pl, kind)
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

// sqlKey is a key as a SQL caller passes it: nil is NULL.
type sqlKey struct{ o, at, uk *string }

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
