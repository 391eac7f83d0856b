package pgsched_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/pgschedtest"
)

type resize struct {
	Image string `json:"image"`
	Width int    `json:"width"`
}

func (resize) Kind() string { return "resize" }

type badArgs struct{ F float64 }

func (badArgs) Kind() string { return "bad" }

// TestTypedHandlers: a typed handler gets its payload decoded into the
// type NewTask encoded, plain and in a transaction; a payload that does
// not decode kills the task at once with a message naming the type,
// instead of retrying something no retry can fix.
func TestTypedHandlers(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	now := time.Now()

	task, err := pgsched.NewTask("img-1", now, resize{Image: "cat.png", Width: 640})
	require.NoError(t, err)
	require.Equal(t, "resize", task.Kind)
	require.JSONEq(t, `{"image":"cat.png","width":640}`, string(task.Payload))
	txTask, err := pgsched.NewTask("img-2", now, resize{Image: "dog.png", Width: 320})
	require.NoError(t, err)
	txTask.Kind = "resize_tx"
	_, err = b.client.ScheduleMany(ctx, []pgsched.Task{
		task, txTask,
		{OrderingID: "img-3", ScheduledAt: now, Kind: "resize", Payload: []byte(`{"image": 5}`)},
	})
	require.NoError(t, err)

	var got []resize
	var txGot []resize
	cfg := fastConfig(b.db.Schema)
	cfg.Handlers = map[string]pgsched.Handler{
		pgsched.KindOf[resize](): pgsched.WorkArgs(func(_ context.Context, _ *pgsched.Job, r resize) error {
			got = append(got, r)
			return nil
		}),
	}
	cfg.TxHandlers = map[string]pgsched.TxHandler{
		"resize_tx": pgsched.WorkArgsTx(func(ctx context.Context, tx pgx.Tx, _ *pgsched.Job, r resize) error {
			txGot = append(txGot, r)
			_, err := tx.Exec(ctx, "SELECT 1")
			return err
		}),
	}
	runs := pgschedtest.WorkDue(ctx, t, b.db.Pool, cfg)
	require.Len(t, runs, 3)
	require.Equal(t, []resize{{Image: "cat.png", Width: 640}}, got)
	require.Equal(t, []resize{{Image: "dog.png", Width: 320}}, txGot)
	require.Equal(t, 2, countRows(t, b, "completions"))

	var lastError string
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT last_error FROM "+b.db.Schema+".dead_tasks WHERE ordering_id = 'img-3'").Scan(&lastError))
	require.Contains(t, lastError, `payload of kind "resize" does not decode into pgsched_test.resize`)
	for _, r := range runs {
		if r.Job.OrderingID == "img-3" {
			require.ErrorContains(t, r.Err, "does not decode")
		} else {
			require.NoError(t, r.Err)
		}
	}
}

// TestNewTaskRefusesWhatCannotBeEncoded: args that do not encode, and nil
// args, are an ErrInvalidTask before anything is sent.
func TestNewTaskRefusesWhatCannotBeEncoded(t *testing.T) {
	t.Parallel()
	_, err := pgsched.NewTask("x", time.Now(), badArgs{F: math.NaN()})
	require.True(t, errors.Is(err, pgsched.ErrInvalidTask), "%v", err)
	require.EqualError(t, err, "pgsched: invalid task: payload cannot hold NaN: encoding pgsched_test.badArgs: JSON has no NaN or infinite numbers")
	_, err = pgsched.NewTask("x", time.Now(), nil)
	require.True(t, errors.Is(err, pgsched.ErrInvalidTask), "%v", err)
}
