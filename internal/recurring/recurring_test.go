package recurring_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/recurring"
	"github.com/pgsched/pgsched/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// logBuf collects a logger's lines.
type logBuf struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// count counts the lines holding every one of parts.
func (l *logBuf) count(parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range strings.Split(l.buf.String(), "\n") {
		all := line != ""
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

type bundle struct {
	db   *pgtest.DB
	st   store.Store
	logs *logBuf
	m    *recurring.Materializer
}

func setup(t *testing.T) bundle {
	t.Helper()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	st, err := store.New(db.Schema)
	require.NoError(t, err)
	logs := &logBuf{}
	m := &recurring.Materializer{Store: st, DB: db.Pool, Horizon: 2 * time.Second,
		Logger:   slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		RetryMin: 100 * time.Millisecond, RetryMax: 400 * time.Millisecond}
	return bundle{db: db, st: st, logs: logs, m: m}
}

// insertBad writes schedules as no upsert would take them now (as rows
// written before upserts checked as much, or by hand): a zone no worker
// loads for sure, a spec that does not parse, a payload schedule_many
// refuses.
func (b bundle) insertBad(t *testing.T) {
	t.Helper()
	_, err := b.db.Pool.Exec(context.Background(), "INSERT INTO "+b.db.Schema+`.recurring_schedules (name, spec, time_zone, payload) VALUES
		('bad-zone', '@every 1s', 'posix/Europe/Berlin', '{}'),
		('bad-spec', '61 * * * *', 'UTC', '{}'),
		('bad-payload', '@every 1s', 'UTC', (repeat('[', 127) || repeat(']', 127))::jsonb)`)
	require.NoError(t, err)
}

type state struct {
	failingSince, retryAt *time.Time
	lastError             *string
	ticks                 int
}

func (b bundle) state(t *testing.T, name string) state {
	t.Helper()
	var s state
	ctx := context.Background()
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT failing_since, retry_at, last_error FROM "+b.db.Schema+".recurring_schedules WHERE name = $1",
		name).Scan(&s.failingSince, &s.retryAt, &s.lastError))
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+b.db.Schema+".tasks WHERE ordering_id = $1", name).Scan(&s.ticks))
	return s
}

// waitRetryDue waits until the database's clock passes every retry_at.
func (b bundle) waitRetryDue(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(pgtest.Patience(10 * time.Second))
	for {
		var due bool
		require.NoError(t, b.db.Pool.QueryRow(context.Background(),
			"SELECT coalesce(max(retry_at), now()) <= now() FROM "+b.db.Schema+".recurring_schedules").Scan(&due))
		if due {
			return
		}
		require.True(t, time.Now().Before(deadline), "retry_at never passed")
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSetAside: a round creates the ticks of the schedule that works and
// sets aside those that fail, each with its error, logged once however
// many rounds retry it; retries wait longer each time; a retry that works,
// an upsert and a resume each take a schedule back.
func TestSetAside(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.insertBad(t)
	_, err := b.st.RecurringUpsert(ctx, b.db.Pool, store.RecurringDef{Name: "good", Spec: "@every 1s", Kind: "k", Payload: []byte("{}")})
	require.NoError(t, err)

	require.NoError(t, b.m.Round(ctx))
	require.Positive(t, b.state(t, "good").ticks, "the schedule that works ticks")
	require.Nil(t, b.state(t, "good").failingSince)
	wantErr := map[string]string{
		"bad-zone":    `time_zone: cronspec: unknown time zone "posix/Europe/Berlin"`,
		"bad-spec":    `spec "61 * * * *": cronspec: minute field "61": value 61 out of range 0-59`,
		"bad-payload": "invalid task: pgsched: payload is nested more than 126 levels deep",
	}
	first := map[string]time.Duration{}
	for name, want := range wantErr {
		s := b.state(t, name)
		require.NotNil(t, s.failingSince, name)
		require.Contains(t, *s.lastError, want, name)
		require.Zero(t, s.ticks, name)
		first[name] = s.retryAt.Sub(*s.failingSince)
		require.InDelta(t, 100*time.Millisecond, first[name], float64(10*time.Millisecond), "%s: the first retry waits RetryMin", name)
		var viewErr string
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT error FROM "+b.db.Schema+".recurring WHERE name = $1", name).Scan(&viewErr))
		require.Equal(t, *s.lastError, viewErr, "the view shows it")
	}
	n, err := b.st.RecurringSetAsideCount(ctx, b.db.Pool)
	require.NoError(t, err)
	require.Equal(t, 3, n)

	// Rounds before retry_at leave them alone; rounds after it retry them,
	// log them at debug level only, and wait longer each time.
	require.NoError(t, b.m.Round(ctx))
	prev := map[string]time.Time{}
	for name := range wantErr {
		prev[name] = *b.state(t, name).retryAt
	}
	for range 3 {
		b.waitRetryDue(t)
		require.NoError(t, b.m.Round(ctx))
		for name := range wantErr {
			s := b.state(t, name)
			require.True(t, s.retryAt.After(prev[name]), "%s retried", name)
			require.LessOrEqual(t, time.Until(*s.retryAt), 400*time.Millisecond+pgtest.Patience(time.Second), "%s: at most RetryMax", name)
			prev[name] = *s.retryAt
		}
	}
	for name := range wantErr {
		require.Equal(t, 1, b.logs.count("level=WARN", "recurring schedule set aside", "schedule="+name), "%s logged once", name)
		require.GreaterOrEqual(t, b.logs.count("level=DEBUG", "still fails", "schedule="+name), 3, name)
		s := b.state(t, name)
		require.Greater(t, s.retryAt.Sub(*s.failingSince), 2*first[name], "%s: retries wait longer", name)
	}
	require.Zero(t, b.logs.count("level=WARN", "schedule=good"))

	// A retry that works takes the schedule back, and says so.
	_, err = b.db.Pool.Exec(ctx, "UPDATE "+b.db.Schema+".recurring_schedules SET payload = '{}' WHERE name = 'bad-payload'")
	require.NoError(t, err)
	b.waitRetryDue(t)
	require.NoError(t, b.m.Round(ctx))
	s := b.state(t, "bad-payload")
	require.Nil(t, s.failingSince)
	require.Nil(t, s.lastError)
	require.Positive(t, s.ticks)
	require.Equal(t, 1, b.logs.count("level=INFO", "recurring schedule works again", "schedule=bad-payload"))

	// An upsert takes it back at once, changed or not: the next round tries.
	_, err = b.st.RecurringUpsert(ctx, b.db.Pool, store.RecurringDef{Name: "bad-spec", Spec: "@every 1s", Payload: []byte("{}")})
	require.NoError(t, err)
	require.Nil(t, b.state(t, "bad-spec").failingSince)
	require.NoError(t, b.m.Round(ctx))
	require.Positive(t, b.state(t, "bad-spec").ticks)
	_, err = b.db.Pool.Exec(ctx, "UPDATE "+b.db.Schema+".recurring_schedules SET failing_since = now(), last_error = 'x', retry_at = now() + interval '1 hour' WHERE name = 'good'")
	require.NoError(t, err)
	_, err = b.st.RecurringUpsert(ctx, b.db.Pool, store.RecurringDef{Name: "good", Spec: "@every 1s", Kind: "k", Payload: []byte("{}")})
	require.NoError(t, err)
	require.Nil(t, b.state(t, "good").failingSince, "an upsert that changes nothing takes it back too")

	// So does a resume; a schedule that still fails is set aside anew, and
	// logged anew.
	_, err = b.st.RecurringResume(ctx, b.db.Pool, "bad-zone")
	require.NoError(t, err)
	require.Nil(t, b.state(t, "bad-zone").failingSince)
	require.NoError(t, b.m.Round(ctx))
	require.NotNil(t, b.state(t, "bad-zone").failingSince)
	require.Equal(t, 2, b.logs.count("level=WARN", "recurring schedule set aside", "schedule=bad-zone"))
	n, err = b.st.RecurringSetAsideCount(ctx, b.db.Pool)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// TestSetAsideOnlyTheUnchanged: a schedule changed between the round's
// read and its failure is not set aside: the change may have fixed it.
func TestSetAsideOnlyTheUnchanged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.insertBad(t)
	var read time.Time
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT updated_at FROM "+b.db.Schema+".recurring_schedules WHERE name = 'bad-spec'").Scan(&read))
	_, err := b.st.RecurringUpsert(ctx, b.db.Pool, store.RecurringDef{Name: "bad-spec", Spec: "@daily", Payload: []byte("{}")})
	require.NoError(t, err)
	rows, err := b.st.RecurringSetAside(ctx, b.db.Pool, []store.RecurringFailure{
		{Name: "bad-spec", UpdatedAt: read, Error: "stale"}, {Name: "missing", UpdatedAt: read, Error: "gone"}}, time.Minute, time.Hour)
	require.NoError(t, err)
	require.Empty(t, rows)
	require.Nil(t, b.state(t, "bad-spec").failingSince)
}

// failingDB fails recurring_materialize as a database going away does.
type failingDB struct {
	store.DBTX
	mu    sync.Mutex
	tries int
}

func (f *failingDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if strings.Contains(sql, "recurring_materialize") {
		f.mu.Lock()
		f.tries++
		f.mu.Unlock()
		return errRow{&pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}}
	}
	return f.DBTX.QueryRow(ctx, sql, args...)
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// TestDatabaseTroubleSetsNothingAside: an error that is the database's
// (here: the server shutting down) ends the round at the first schedule
// it meets, for the caller to log once, and sets no schedule aside.
func TestDatabaseTroubleSetsNothingAside(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, name := range []string{"a", "b", "c"} {
		_, err := b.st.RecurringUpsert(ctx, b.db.Pool, store.RecurringDef{Name: name, Spec: "@every 1s", Payload: []byte("{}")})
		require.NoError(t, err)
	}
	fdb := &failingDB{DBTX: b.db.Pool}
	b.m.DB = fdb
	err := b.m.Round(ctx)
	require.ErrorContains(t, err, "57P01")
	require.True(t, store.Unavailable(err))
	require.Equal(t, 1, fdb.tries, "the round stops at the first")
	n, err := b.st.RecurringSetAsideCount(ctx, b.db.Pool)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Zero(t, b.logs.count("level=WARN"))
}
