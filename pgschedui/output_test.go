package pgschedui_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/pgschedui"
)

// TestConsoleShowsTaskOutput: a completed task's page shows the output its
// handler recorded, under "output", and a completion without one shows
// none.
func TestConsoleShowsTaskOutput(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	ctx := context.Background()
	at := time.Now().Truncate(time.Microsecond)
	db.InsertTask(t, pgtest.TaskRow{OrderingID: "invoice-7", ScheduledAt: at, Kind: "bill", State: "completed"})
	db.InsertTask(t, pgtest.TaskRow{OrderingID: "plain", ScheduledAt: at, Kind: "bill", State: "completed"})
	_, err := db.Pool.Exec(ctx, "UPDATE "+db.Schema+`.completions SET output = '{"total": 12.5}' WHERE ordering_id = 'invoice-7'`)
	require.NoError(t, err)

	h, err := pgschedui.New(db.Pool, pgschedui.Config{Schema: db.Schema})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/ui/", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	page := func(ordering string) string {
		q := url.Values{"ordering_id": {ordering}, "scheduled_at": {at.UTC().Format(time.RFC3339Nano)}, "uniqueness_key": {""}}
		resp, err := http.Get(srv.URL + "/ui/tasks/key?" + q.Encode())
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return string(body)
	}
	got := page("invoice-7")
	require.Contains(t, got, `id="state-completed"`)
	require.Contains(t, got, `<h3>output</h3><pre class="payload" id="output">`)
	require.Contains(t, got, `&#34;total&#34;: 12.5`)
	got = page("plain")
	require.Contains(t, got, `id="state-completed"`)
	require.NotContains(t, got, `id="output"`)
}
