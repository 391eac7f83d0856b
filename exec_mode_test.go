package pgsched_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
)

// TestWorksInEveryQueryExecMode enqueues, runs in order and finishes
// tasks over pools that send parameters the ways deploy/README.md allows
// behind a transaction pooler (exec) and the simple protocol, where pgx
// encodes arguments by their Go type without asking PostgreSQL for the
// parameters' types: the array parameters of enqueues and finishes
// (internal/pgarray) must reach the server as they do bound in binary.
func TestWorksInEveryQueryExecMode(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setupClient(t)
			sep := "?"
			if strings.Contains(b.db.URL, "?") {
				sep = "&"
			}
			cfg, err := pgxpool.ParseConfig(b.db.URL + sep + "default_query_exec_mode=" + mode)
			require.NoError(t, err)
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			c, err := pgsched.NewClient(pool, pgsched.ClientConfig{Schema: b.db.Schema})
			require.NoError(t, err)

			var tasks []pgsched.Task
			at := time.Now()
			for i := range 5 {
				for _, id := range []string{"x", "y", "z"} {
					tasks = append(tasks, pgsched.Task{OrderingID: "id-" + id, ScheduledAt: at.Add(time.Duration(i) * time.Millisecond),
						UniquenessKey: fmt.Sprint(i), Kind: "k", Payload: []byte(fmt.Sprintf(`{"n": %d}`, i))})
				}
			}
			_, err = c.ScheduleMany(context.Background(), tasks)
			require.NoError(t, err)

			var runs runOrder
			wcfg := fastConfig(b.db.Schema)
			wcfg.Handlers = map[string]pgsched.Handler{"k": pgsched.HandlerFunc(func(_ context.Context, job *pgsched.Job) error {
				runs.add(job.OrderingID + " " + job.UniquenessKey)
				return nil
			})}
			startWorkerOn(t, pool, wcfg)
			eventually(t, 10*time.Second, func() bool { return len(runs.list()) == len(tasks) }, "every task runs")
			got := map[string][]string{}
			for _, r := range runs.list() {
				id, key, _ := strings.Cut(r, " ")
				got[id] = append(got[id], key)
			}
			for _, id := range []string{"id-x", "id-y", "id-z"} {
				require.Equal(t, []string{"0", "1", "2", "3", "4"}, got[id], "%s in order", id)
			}
			eventually(t, 10*time.Second, func() bool {
				return countRows(t, b, "heads") == 0 && countRows(t, b, "completions") == len(tasks)
			}, "every outcome recorded")
		})
	}
}
