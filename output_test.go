package pgsched_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
)

// TestTaskOutputKeptWithCompletion: what a handler records with
// Job.RecordOutput is kept with the task's completion and read by key,
// the same from Go and SQL; only the successful run's output counts; a
// TxHandler's output commits with its writes; an output over
// MaxOutputBytes kills the run with the sizes in its error; values jsonb
// cannot store are refused at RecordOutput, naming why.
func TestTaskOutputKeptWithCompletion(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	s := b.db.Schema

	var flaky atomic.Int32
	refusals := make(chan error, 3)
	cfg := fastConfig(s)
	cfg.MaxOutputBytes = 100
	cfg.Retry = pgsched.RetryPolicy{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	cfg.Handlers = map[string]pgsched.Handler{
		"calc": pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error {
			switch job.UniquenessKey {
			case "plain":
				return job.RecordOutput(map[string]int{"sum": 42})
			case "flaky":
				if err := job.RecordOutput(map[string]int32{"run": flaky.Add(1)}); err != nil {
					return err
				}
				if flaky.Load() == 1 {
					return errors.New("first run fails")
				}
			case "big":
				return job.RecordOutput(strings.Repeat("x", 200))
			case "refused":
				for _, v := range []any{json.RawMessage(`{"a":`), json.RawMessage(`"\u0000"`), func() {}} {
					refusals <- job.RecordOutput(v)
				}
			}
			return nil
		}),
	}
	cfg.TxHandlers = map[string]pgsched.TxHandler{
		"book": pgsched.TxHandlerFunc(func(ctx context.Context, tx pgx.Tx, job *pgsched.Job) error {
			return job.RecordOutput(json.RawMessage(`{"booked":true}`))
		}),
	}
	outcomes := watchOutcomes(&cfg)
	startWorker(t, b.db, cfg)

	at := time.Now().Truncate(time.Microsecond)
	key := func(u string) pgsched.Key {
		return pgsched.Key{OrderingID: "o-" + u, ScheduledAt: at, UniquenessKey: u}
	}
	var tasks []pgsched.Task
	for _, u := range []string{"plain", "flaky", "big", "refused", "none"} {
		tasks = append(tasks, pgsched.Task{OrderingID: "o-" + u, ScheduledAt: at, UniquenessKey: u, Kind: "calc"})
	}
	tasks = append(tasks, pgsched.Task{OrderingID: "o-tx", ScheduledAt: at, UniquenessKey: "tx", Kind: "book"})
	_, err := b.client.ScheduleMany(ctx, tasks)
	require.NoError(t, err)
	outcomes.waitFor(t, 10*time.Second, func(l *outcomeLog) bool { return l.count("completed") == 5 && l.count("dead") == 1 },
		"five complete, big dies")

	sqlOutput := func(k pgsched.Key) []byte {
		var out []byte
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT "+s+".task_output($1, $2, $3)", k.OrderingID, k.ScheduledAt, k.UniquenessKey).Scan(&out))
		return out
	}
	for u, want := range map[string]string{"plain": `{"sum": 42}`, "flaky": `{"run": 2}`, "tx": `{"booked": true}`} {
		k := key(u)
		got, err := b.client.TaskOutput(ctx, k)
		require.NoError(t, err)
		require.JSONEq(t, want, string(got), u)
		require.JSONEq(t, want, string(sqlOutput(k)), "%s from SQL", u)
	}
	for _, u := range []string{"none", "refused", "big"} {
		got, err := b.client.TaskOutput(ctx, key(u))
		require.NoError(t, err)
		require.Nil(t, got, "%s keeps no output", u)
		require.Nil(t, sqlOutput(key(u)))
	}
	got, err := b.client.TaskOutput(ctx, pgsched.Key{OrderingID: "nobody", ScheduledAt: at})
	require.NoError(t, err)
	require.Nil(t, got, "an unknown key has no output")

	var lastError string
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT last_error FROM "+s+".dead WHERE ordering_id = 'o-big'").Scan(&lastError))
	require.Contains(t, lastError, "output of 202 bytes, over the worker's MaxOutputBytes (100)")

	for _, want := range []string{"is not valid JSON", `\u0000`, "unsupported type"} {
		err := <-refusals
		require.ErrorIs(t, err, pgsched.ErrInvalidOutput)
		require.Contains(t, err.Error(), want)
	}
	_, err = b.client.TaskOutput(ctx, pgsched.Key{OrderingID: "", ScheduledAt: at})
	require.ErrorIs(t, err, pgsched.ErrInvalidTask, "a bad key is refused as elsewhere")
}
