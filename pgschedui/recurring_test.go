package pgschedui_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/pgschedui"
)

// TestConsoleShowsSetAside: the recurring page marks a schedule the leader
// set aside and shows its error; one that works shows neither.
func TestConsoleShowsSetAside(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	ctx := context.Background()
	client, err := pgsched.NewClient(db.Pool, pgsched.ClientConfig{Schema: db.Schema})
	require.NoError(t, err)
	_, err = client.UpsertRecurring(ctx, pgsched.Recurring{Name: "works", Spec: "@hourly"})
	require.NoError(t, err)
	// As the leader leaves a schedule it cannot create ticks of.
	_, err = db.Pool.Exec(ctx, "INSERT INTO "+db.Schema+`.recurring_schedules (name, spec, time_zone, failing_since, last_error, retry_at)
		VALUES ('fails', '@hourly', 'posix/Europe/Berlin', now(), 'time_zone: cronspec: unknown time zone "posix/Europe/Berlin"', now() + interval '1 minute')`)
	require.NoError(t, err)

	h, err := pgschedui.New(db.Pool, pgschedui.Config{Schema: db.Schema})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/ui/", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/ui/recurring")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	page := string(body)
	require.Contains(t, page, `id="set-aside-fails"`)
	require.Contains(t, page, "time_zone: cronspec: unknown time zone &#34;posix/Europe/Berlin&#34; (since ")
	require.NotContains(t, page, `id="set-aside-works"`)
	require.Contains(t, page, `<span class="badge ok">active</span>`, "the one that works")
}
