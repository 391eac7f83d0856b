package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgsched/pgsched/pgschedui"
)

// consolePages are what the console workload times: every page, with the
// filters an on-call engineer types, and the detail pages.
var consolePages = []string{
	"/ui/", "/ui/kinds", "/ui/cluster", "/ui/tasks", "/ui/tasks?kind=k3", "/ui/tasks?ordering_id=o-777",
	"/ui/tasks?state=running", "/ui/dead", "/ui/dead?kind=k5", "/ui/dead/%d", "/ui/tasks/key?ordering_id=o-777&scheduled_at=%s",
	"/ui/recurring",
}

// consoleWorkload: the web console's server time per page on a database
// holding -console-tasks pending and as many dead tasks (see
// fillConsole), an hour of throughput history from three nodes
// and the leader's count per kind, as a running cluster keeps them. Each
// page is rendered 20 times in process (no network); the median and the
// worst are printed in milliseconds.
func (b *bench) consoleWorkload() workload {
	n := short(b.consoleTasks)
	labels := []string{fmt.Sprintf("console %s pending + %s dead: count per kind (leader), ms", n, n)}
	for _, p := range consolePages {
		labels = append(labels, fmt.Sprintf("console %s: GET %s median ms", n, trimKey(p)),
			fmt.Sprintf("console %s: GET %s worst ms", n, trimKey(p)))
	}
	return workload{[]string{"console", "i"}, labels, b.consoleRun}
}

func trimKey(p string) string {
	if i := len("/ui/tasks/key"); len(p) > i && p[:i] == "/ui/tasks/key" {
		return "/ui/tasks/key?…"
	}
	return strings.Replace(p, "%d", "{id}", 1)
}

func (b *bench) consoleRun(ctx context.Context) ([]float64, error) {
	pool, _, schema, cleanup, err := b.fresh(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	at, err := fillConsole(ctx, pool, schema, b.consoleTasks)
	if err != nil {
		return nil, err
	}
	began := time.Now()
	if _, err := pool.Exec(ctx, "SELECT "+schema+".count_kinds()"); err != nil {
		return nil, err
	}
	out := []float64{float64(time.Since(began).Microseconds()) / 1000}
	h, err := pgschedui.New(pool, pgschedui.Config{Schema: schema})
	if err != nil {
		return nil, err
	}
	for _, p := range consolePages {
		switch {
		case strings.Contains(p, "%s"):
			p = fmt.Sprintf(p, url.QueryEscape(at.UTC().Format(time.RFC3339Nano)))
		case strings.Contains(p, "%d"):
			p = fmt.Sprintf(p, b.consoleTasks/2)
		}
		var ms []float64
		for range 20 {
			rec := httptest.NewRecorder()
			req := httptest.NewRequestWithContext(ctx, http.MethodGet, p, nil)
			start := time.Now()
			h.ServeHTTP(rec, req)
			ms = append(ms, float64(time.Since(start).Microseconds())/1000)
			if rec.Code != http.StatusOK {
				return nil, fmt.Errorf("GET %s: %d: %s", p, rec.Code, rec.Body.String())
			}
		}
		slices.Sort(ms)
		out = append(out, ms[len(ms)/2], ms[len(ms)-1])
	}
	return out, nil
}

// fillConsole writes n pending tasks, n dead tasks, and an hour of
// per-minute history from three nodes, and returns o-777's first task's
// scheduled_at. Half the pending tasks are heads of their own ordering_id
// (every other one due a minute ago, the rest in an hour), the other half
// wait in the backlog, ten behind each of the first n/20 heads. Ten kinds.
func fillConsole(ctx context.Context, pool *pgxpool.Pool, schema string, n int) (time.Time, error) {
	began := time.Now()
	steps := []string{
		`INSERT INTO ` + schema + `.heads (partition_id, ordering_id, scheduled_at, uniqueness_key, kind, payload, run_at, backlog)
		 SELECT ` + schema + `.partition_of('o-' || i, s.partition_count), 'o-' || i, t, '', 'k' || (i % 10),
		        jsonb_build_object('user', i, 'note', 'a payload of a realistic size, with some text in it'), t, i < $1::bigint / 20
		 FROM generate_series(0, $1::bigint / 2 - 1) AS i, ` + schema + `.settings s,
		      LATERAL (SELECT CASE WHEN i % 2 = 0 THEN now() - interval '1 minute' ELSE now() + interval '1 hour' END
		                      + i * interval '1 microsecond' AS t) x`,
		`INSERT INTO ` + schema + `.backlog (partition_id, ordering_id, scheduled_at, uniqueness_key, kind, payload, run_at)
		 SELECT ` + schema + `.partition_of('o-' || i, s.partition_count), 'o-' || i, t, '', 'k' || (i % 10),
		        jsonb_build_object('user', i, 'note', 'a payload of a realistic size, with some text in it'), t
		 FROM generate_series(0, $1::bigint / 20 - 1) AS i, generate_series(1, 10) AS j, ` + schema + `.settings s,
		      LATERAL (SELECT now() + interval '1 hour' + i * interval '1 microsecond' + j * interval '1 minute' AS t) x`,
		`INSERT INTO ` + schema + `.dead_tasks (partition_id, id, ordering_id, scheduled_at, uniqueness_key, kind, payload, attempt, last_error, node_id, died_at)
		 SELECT ` + schema + `.partition_of('d-' || i, s.partition_count), i, 'd-' || i, now() - interval '2 days', '', 'k' || (i % 10),
		        '{"user": 1}', 25, 'webhook: kind "k": POST https://hooks.example.com: status 503 Service Unavailable (retryable)', 'node-' || (i % 3),
		        now() - interval '2 days' + i * interval '100 millisecond'
		 FROM generate_series(0, $1::bigint - 1) AS i, ` + schema + `.settings s`,
		`INSERT INTO ` + schema + `.stats_minutes (minute, node_id, completed, retried, dead, started, lateness_sum, lateness_max)
		 SELECT date_trunc('minute', now()) - m * interval '1 minute', 'node-' || k, 600000, 300, 20, 600000, 600000 * 0.004, 0.05
		 FROM generate_series(0, 59) AS m, generate_series(0, 2) AS k
		 WHERE $1::bigint > 0`,
	}
	for i, q := range steps {
		if _, err := pool.Exec(ctx, q, n); err != nil {
			return time.Time{}, fmt.Errorf("console fixture step %d: %w", i+1, err)
		}
		fmt.Fprintf(os.Stderr, "console: fixture step %d of %d written (%s)\n", i+1, len(steps), time.Since(began).Round(time.Second))
	}
	if _, err := pool.Exec(ctx, "VACUUM (ANALYZE) "+schema+".heads, "+schema+".backlog, "+schema+".dead_tasks"); err != nil {
		return time.Time{}, err
	}
	var at time.Time
	err := pool.QueryRow(ctx, "SELECT scheduled_at FROM "+schema+".heads WHERE ordering_id = 'o-777'").Scan(&at)
	return at, err
}
