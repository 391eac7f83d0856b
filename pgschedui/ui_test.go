package pgschedui_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/pgschedui"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// browser starts headless Chromium (Debian's package; scripts/test.sh
// installs it) and returns a context driving one tab. Everything the
// pages write to the browser's console (errors, failed loads, CSP
// violations, warnings) fails the test at its end.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		path, err = exec.LookPath("chromium-browser")
	}
	require.NoError(t, err, "the console's browser tests need Chromium: apt-get install chromium (scripts/ensure-chromium.sh)")
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900), chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	// The first call starts the browser, which lives as long as the
	// context of that call: no timeout on it.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")))
	var (
		mu   sync.Mutex
		msgs []string
	)
	listen, stopListening := context.WithCancel(ctx)
	messages := chromedp.Console(listen)
	listened := make(chan struct{})
	go func() {
		defer close(listened)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException || m.Type == chromedp.ConsoleWarning {
				mu.Lock()
				msgs = append(msgs, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line))
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		// A last look, so messages of the last page arrive.
		_, _ = chromedp.Run(ctx, chromedp.Evaluate[int]("1"))
		stopListening()
		<-listened
		mu.Lock()
		defer mu.Unlock()
		if !t.Failed() {
			require.Empty(t, msgs, "the pages wrote to the browser's console")
		}
		cancelTab()
		cancelAlloc()
	})
	return ctx
}

// reloadUntil loads url until the script js counts more than zero, for
// what the page shows a moment after it happens (the leader's counts, an
// outcome's write).
func reloadUntil(t *testing.T, b context.Context, url, js string) {
	t.Helper()
	for deadline := time.Now().Add(pgtest.Patience(20 * time.Second)); ; time.Sleep(50 * time.Millisecond) {
		act(t, b, chromedp.Navigate(url), chromedp.WaitVisible("main"))
		n, err := chromedp.Run(b, chromedp.Evaluate[int](js))
		require.NoError(t, err)
		if n > 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s: %s stayed 0", url, js)
	}
}

// follow clicks sel, a link or a form's button, and waits until the page
// it leads to has loaded (a marker set on the old page is gone), so the
// next step cannot abort that navigation.
func follow(t *testing.T, b context.Context, sel string) {
	t.Helper()
	_, err := chromedp.Run(b, chromedp.Evaluate[bool](`window.__leaving = true`))
	require.NoError(t, err)
	act(t, b, chromedp.Click(sel))
	for deadline := time.Now().Add(pgtest.Patience(20 * time.Second)); ; time.Sleep(20 * time.Millisecond) {
		loaded, err := chromedp.Run(b, chromedp.Evaluate[bool](`window.__leaving === undefined && document.readyState === "complete"`))
		if err == nil && loaded {
			return
		}
		require.True(t, time.Now().Before(deadline), "clicking %s led nowhere (%v)", sel, err)
	}
}

// act runs steps in the browser tab, each batch within 20 s (longer on
// Citus: pgtest.Patience).
func act(t *testing.T, b context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b, pgtest.Patience(20*time.Second))
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, steps...))
}

// screenshot saves the page as PNGs at laptop (1280x800) and phone
// (390x844) sizes in PGSCHED_SCREENSHOTS (or the test's temporary
// directory) and returns the laptop one's path.
func screenshot(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	dir := os.Getenv("PGSCHED_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	var first string
	for _, size := range []struct {
		suffix string
		w, h   int64
		mobile bool
	}{{"", 1280, 800, false}, {"-phone", 390, 844, true}} {
		opts := []chromedp.EmulateViewportOption{}
		if size.mobile {
			opts = append(opts, chromedp.EmulateMobile)
		}
		require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(size.w, size.h, opts...)))
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: PNG
		require.NoError(t, err)
		path := filepath.Join(dir, name+size.suffix+".png")
		require.NoError(t, os.WriteFile(path, png, 0o644))
		require.Greater(t, len(png), 5000, "a screenshot with something on it")
		if first == "" {
			first = path
		}
	}
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)))
	return first
}

// TestConsoleInBrowser: a worker runs a cluster with pending, running,
// dead and recurring work; each console page, loaded in Chromium, shows
// it: counts per kind, the node leading and its partitions, a task
// search, the dead task's error, the schedule.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	ctx := context.Background()
	client, err := pgsched.NewClient(db.Pool, pgsched.ClientConfig{Schema: db.Schema})
	require.NoError(t, err)

	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	w, err := pgsched.NewWorker(db.Pool, pgsched.WorkerConfig{
		Schema: db.Schema, NodeID: "console-node", LeaseTTL: time.Second, ClusterInterval: 100 * time.Millisecond,
		CountInterval: 100 * time.Millisecond,
		Handlers: map[string]pgsched.Handler{
			"ping": pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error { return nil }),
			"email": pgsched.HandlerFunc(func(ctx context.Context, _ *pgsched.Job) error {
				select {
				case <-block:
				case <-ctx.Done():
				}
				return nil
			}),
			"charge": pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error {
				return pgsched.Permanent(errors.New("card declined: insufficient funds"))
			}),
		},
	})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() { _ = w.Stop(context.Background()) })

	now := time.Now()
	var tasks []pgsched.Task
	for i := range 5 {
		tasks = append(tasks, pgsched.Task{OrderingID: fmt.Sprintf("user-%d", i), ScheduledAt: now.Add(time.Hour), Kind: "email",
			Payload: json.RawMessage(`{"to": "a@example.com"}`)})
	}
	tasks = append(tasks,
		pgsched.Task{OrderingID: "user-0", ScheduledAt: now, Kind: "email"},
		pgsched.Task{OrderingID: "order-9", ScheduledAt: now, Kind: "charge", Payload: json.RawMessage(`{"amount": 1200, "currency": "EUR"}`)})
	for i := range 20 {
		tasks = append(tasks, pgsched.Task{OrderingID: fmt.Sprintf("ping-%d", i), ScheduledAt: now, Kind: "ping"})
	}
	_, err = client.ScheduleMany(ctx, tasks)
	require.NoError(t, err)
	_, err = client.UpsertRecurring(ctx, pgsched.Recurring{Name: "nightly-report", Spec: "30 2 * * *", TimeZone: "Europe/Berlin", Kind: "report"})
	require.NoError(t, err)
	// Wait for the running email, the dead charge and the 20 pings.
	for deadline := time.Now().Add(pgtest.Patience(20 * time.Second)); ; {
		running, err := client.ListTasks(ctx, pgsched.TaskFilter{State: pgsched.StateRunning})
		require.NoError(t, err)
		var dead, done int
		require.NoError(t, db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+db.Schema+".dead_tasks").Scan(&dead))
		require.NoError(t, db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+db.Schema+".completions").Scan(&done))
		if len(running) == 1 && dead == 1 && done == 20 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the cluster did not settle: %d running, %d dead, %d completed", len(running), dead, done)
		time.Sleep(20 * time.Millisecond)
	}

	h, err := pgschedui.New(db.Pool, pgschedui.Config{Schema: db.Schema})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/ui/", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	b := browser(t)

	do := func(steps ...chromedp.Action[chromedp.Void]) { t.Helper(); act(t, b, steps...) }
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(b, chromedp.Text(sel))
		require.NoError(t, err)
		return v
	}
	count := func(js string) int {
		t.Helper()
		v, err := chromedp.Run(b, chromedp.Evaluate[int](js))
		require.NoError(t, err)
		return v
	}
	sum := func(attr string) int {
		t.Helper()
		return count(`[...document.querySelectorAll("#throughput .bar")].reduce((n, b) => n + Number(b.dataset.` + attr + `), 0)`)
	}
	// Overview: the leader's count and the hour's history catch up within
	// a few rounds of each (100 ms and 250 ms here); reload until they do.
	for deadline := time.Now().Add(pgtest.Patience(20 * time.Second)); ; time.Sleep(50 * time.Millisecond) {
		do(chromedp.Navigate(srv.URL+"/ui/"), chromedp.WaitVisible("#kinds"))
		if text("#pending") == "5" && text("#running") == "1" && text("#dead") == "1" && sum("completed") == 20 && sum("dead") == 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the overview did not show the run: pending %s, running %s, dead %s, chart %d completed, %d dead",
			text("#pending"), text("#running"), text("#dead"), sum("completed"), sum("dead"))
	}
	require.Equal(t, 60, count(`document.querySelectorAll("#throughput .bar").length`), "an hour of minutes")
	require.Positive(t, count(`document.querySelectorAll("#throughput rect.completed").length`), "the completed tasks are drawn")
	require.Contains(t, text("#hour-totals"), "20 completed")
	require.Positive(t, count(`document.querySelectorAll("#lateness-chart rect.worst").length`), "first attempts' lateness is drawn")
	kinds := text("#kinds")
	require.Contains(t, kinds, "email")
	require.Contains(t, kinds, "charge")
	require.Contains(t, text("#counted"), "Counted by the leader")
	t.Logf("overview: %s", screenshot(t, b, "overview"))

	// Kinds, and their limits: none, then one with a weighted group.
	do(chromedp.Navigate(srv.URL+"/ui/kinds"), chromedp.WaitVisible("#kinds"))
	require.Contains(t, text("#limits"), "No kind is limited.")
	_, err = client.SetLimit(ctx, "email", pgsched.Limit{MaxRunning: 2, MaxStarts: 30, Per: time.Minute})
	require.NoError(t, err)
	_, err = client.SetGroupWeight(ctx, "email", "gold", 3)
	require.NoError(t, err)
	do(chromedp.Navigate(srv.URL+"/ui/kinds"), chromedp.WaitVisible("#kinds"))
	require.Contains(t, text("#kinds"), "charge")
	require.Contains(t, text("#limits"), "email")
	require.Contains(t, text("#limits"), "30 per 1m0s")
	require.Regexp(t, `email\s+gold\s+3\s+yes`, text("#weights"))
	t.Logf("kinds: %s", screenshot(t, b, "kinds"))

	// Cluster: the node, leading, serving every partition.
	do(chromedp.Navigate(srv.URL+"/ui/cluster"), chromedp.WaitVisible("#nodes"))
	nodes := text("#nodes")
	require.Contains(t, nodes, "console-node")
	require.Contains(t, nodes, "leader")
	require.Contains(t, nodes, "live")
	require.Equal(t, 8, count(`document.querySelectorAll("#partitions .cell").length`))
	require.Zero(t, count(`document.querySelectorAll("#partitions .cell.none").length`), "every partition is served")
	t.Logf("cluster: %s", screenshot(t, b, "cluster"))

	// Tasks: search one ordering_id through the form.
	// follow waits for the result page to have loaded: the location
	// changes when its navigation commits, before its rows are all there.
	do(chromedp.Navigate(srv.URL+"/ui/tasks"), chromedp.WaitVisible("#tasks"),
		chromedp.SendKeys(`input[name="ordering_id"]`, "user-0"))
	follow(t, b, `form.filter button[type="submit"]`)
	loc, err := chromedp.Run(b, chromedp.Location())
	require.NoError(t, err)
	require.Contains(t, loc, "ordering_id=user-0", "the search form navigated")
	do(chromedp.WaitVisible("#tasks"))
	require.Equal(t, 2, count(`document.querySelectorAll("#tasks tbody tr").length`), "user-0's running task and the one after it, in run order")
	found := text("#tasks")
	require.True(t, strings.Index(found, "running") < strings.Index(found, "pending"), "run order: %s", found)
	t.Logf("tasks: %s", screenshot(t, b, "tasks"))

	// A task's page, from the list: its payload pretty-printed.
	follow(t, b, `#tasks tbody tr:last-child td:nth-child(2) a`)
	do(chromedp.WaitVisible("#state-pending"))
	detail := text("#state-pending")
	require.Contains(t, detail, "email")
	require.Equal(t, "0", text("#state-pending .priority"), "the default priority")
	require.Contains(t, text("pre.payload"), "{\n  \"to\": \"a@example.com\"\n}")
	t.Logf("task: %s", screenshot(t, b, "task"))

	// Dead: the error, and no secrets anywhere.
	do(chromedp.Navigate(srv.URL+"/ui/dead"), chromedp.WaitVisible("#dead"))
	require.Contains(t, text("#dead"), "card declined: insufficient funds")
	html, err := chromedp.Run(b, chromedp.OuterHTML("html"))
	require.NoError(t, err)
	require.NotContains(t, html, "postgres://", "no connection string on the page")
	t.Logf("dead: %s", screenshot(t, b, "dead"))

	// A dead task's page: error, payload, and a link to its key.
	follow(t, b, `#dead tbody tr td:first-child a`)
	do(chromedp.WaitVisible("#deadtask"))
	require.Contains(t, text("#last-error"), "card declined: insufficient funds")
	require.Contains(t, text("#payload"), `"currency": "EUR"`)
	require.Equal(t, "0", text("#priority"))
	t.Logf("dead task: %s", screenshot(t, b, "deadtask"))
	follow(t, b, `#deadtask dd a[href*="tasks/key"]`)
	do(chromedp.WaitVisible("#state-dead"))
	require.Contains(t, text("#state-dead"), "card declined")

	// Without a token every action is refused, and nothing changes.
	resp, err := http.PostForm(srv.URL+"/ui/dead/retry", url.Values{"id": {"1"}})
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, string(body), "actions are disabled")

	// Bad detail addresses get a clear answer, not a server error.
	for path, want := range map[string]string{
		"/ui/dead/abc": "is not a task id",
		"/ui/tasks/key?ordering_id=x&scheduled_at=yesterday": "RFC 3339",
		"/ui/dead/123456789": "No dead task 123456789",
		"/ui/tasks/key?ordering_id=x&scheduled_at=2026-01-02T03:04:05Z": "No task with this key",
	} {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Contains(t, []int{http.StatusBadRequest, http.StatusNotFound}, resp.StatusCode, path)
		require.Contains(t, string(body), want, path)
	}

	// Recurring.
	do(chromedp.Navigate(srv.URL+"/ui/recurring"), chromedp.WaitVisible("#recurring"))
	rec := text("#recurring")
	require.Contains(t, rec, "nightly-report")
	require.Contains(t, rec, "Europe/Berlin")
	t.Logf("recurring: %s", screenshot(t, b, "recurring"))
}

// TestConsoleRefusesBadConfig: a nil pool, a bad prefix or schema, or a
// token shorter than 16 bytes is an error at New.
func TestConsoleRefusesBadConfig(t *testing.T) {
	t.Parallel()
	_, err := pgschedui.New(nil, pgschedui.Config{})
	require.Error(t, err)
	pool := pgtest.AdminPool(t)
	_, err = pgschedui.New(pool, pgschedui.Config{Prefix: "ui"})
	require.ErrorContains(t, err, "must start and end with /")
	_, err = pgschedui.New(pool, pgschedui.Config{Schema: "Bad-Schema"})
	require.Error(t, err)
	for _, short := range []string{"x", "fifteen-bytes!!"} {
		_, err = pgschedui.New(pool, pgschedui.Config{Token: short})
		require.ErrorIs(t, err, pgschedui.ErrShortToken, "%q", short)
		require.ErrorContains(t, err, "Config.Token must be at least 16 bytes")
		require.NotContains(t, err.Error(), short, "an error never repeats the token")
	}
	_, err = pgschedui.New(pool, pgschedui.Config{Token: "sixteen-bytes!!!"})
	require.NoError(t, err)
}

// TestConsoleActionsInBrowser: with a token, a person signs in on the
// page, retries a dead task (it runs again and completes), pauses a kind
// (its new task does not start) and resumes it (it runs). Without signing
// in, or without the form's CSRF field, an action is refused.
func TestConsoleActionsInBrowser(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	ctx := context.Background()
	client, err := pgsched.NewClient(db.Pool, pgsched.ClientConfig{Schema: db.Schema})
	require.NoError(t, err)
	var failed atomic.Bool
	emails := make(chan string, 10)
	slowStarted, slowEnded := make(chan struct{}, 1), make(chan error, 1)
	w, err := pgsched.NewWorker(db.Pool, pgsched.WorkerConfig{
		Schema: db.Schema, NodeID: "actions-node", LeaseTTL: time.Second, ClusterInterval: 100 * time.Millisecond,
		PollInterval: 100 * time.Millisecond, CountInterval: 100 * time.Millisecond,
		Handlers: map[string]pgsched.Handler{
			"charge": pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error {
				if failed.CompareAndSwap(false, true) {
					return pgsched.Permanent(errors.New("card declined"))
				}
				return nil
			}),
			"email": pgsched.HandlerFunc(func(_ context.Context, j *pgsched.Job) error {
				emails <- j.OrderingID
				return nil
			}),
			"slow": pgsched.HandlerFunc(func(ctx context.Context, _ *pgsched.Job) error {
				slowStarted <- struct{}{}
				<-ctx.Done()
				slowEnded <- context.Cause(ctx)
				return context.Cause(ctx)
			}),
			"doomed": pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error {
				return pgsched.Permanent(errors.New("doomed"))
			}),
		},
	})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	_, err = client.Schedule(ctx, pgsched.Task{OrderingID: "order-1", ScheduledAt: time.Now(), Kind: "charge"})
	require.NoError(t, err)
	_, err = client.Schedule(ctx, pgsched.Task{OrderingID: "mail-1", ScheduledAt: time.Now(), Kind: "email"})
	require.NoError(t, err)
	require.Equal(t, "mail-1", <-emails)
	var deadID int64
	for deadline := time.Now().Add(pgtest.Patience(20 * time.Second)); ; time.Sleep(20 * time.Millisecond) {
		if db.Pool.QueryRow(ctx, "SELECT id FROM "+db.Schema+".dead_tasks").Scan(&deadID) == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "the charge did not die")
	}

	h, err := pgschedui.New(db.Pool, pgschedui.Config{Schema: db.Schema, Token: "s3cret-console-token"})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/ui/", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	// Refused: not signed in; signed in without the CSRF field; a wrong token.
	post := func(path string, form url.Values, cookies ...*http.Cookie) int {
		req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for _, c := range cookies {
			req.AddCookie(c)
		}
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusForbidden, post("/ui/dead/retry", url.Values{"id": {fmt.Sprint(deadID)}}))
	require.Equal(t, http.StatusForbidden, post("/ui/signin", url.Values{"token": {"guess"}}))
	signIn, err := http.NewRequest(http.MethodPost, srv.URL+"/ui/signin", strings.NewReader("token=s3cret-console-token"))
	require.NoError(t, err)
	signIn.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(signIn)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	session := resp.Cookies()
	require.NotEmpty(t, session)
	require.True(t, session[0].HttpOnly)
	require.Equal(t, http.StatusForbidden, post("/ui/dead/retry", url.Values{"id": {fmt.Sprint(deadID)}}, session...), "no CSRF field")
	var dead int
	require.NoError(t, db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+db.Schema+".dead_tasks").Scan(&dead))
	require.Equal(t, 1, dead, "the refused actions changed nothing")

	b := browser(t)
	do := func(steps ...chromedp.Action[chromedp.Void]) { t.Helper(); act(t, b, steps...) }
	// Sign in on the page, then retry the dead task.
	do(chromedp.Navigate(srv.URL+"/ui/dead"), chromedp.WaitVisible(`input[name="token"]`),
		chromedp.SendKeys(`input[name="token"]`, "s3cret-console-token"), chromedp.Submit(`form.signin`),
		chromedp.WaitVisible("#signed-in"), chromedp.WaitVisible(fmt.Sprintf("#retry-%d", deadID)))
	t.Logf("dead, signed in: %s", screenshot(t, b, "dead-actions"))
	page, err := chromedp.Run(b, chromedp.OuterHTML("html"))
	require.NoError(t, err)
	require.NotContains(t, page, "s3cret-console-token", "the token never appears on a page")
	follow(t, b, fmt.Sprintf("#retry-%d", deadID))
	for deadline := time.Now().Add(pgtest.Patience(20 * time.Second)); ; time.Sleep(20 * time.Millisecond) {
		var done int
		require.NoError(t, db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+db.Schema+".completions WHERE ordering_id = 'order-1'").Scan(&done))
		if done == 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the retried task did not complete")
	}

	// Pause email from the overview (a later email keeps the kind listed):
	// a new email does not start; resume: it does.
	_, err = client.Schedule(ctx, pgsched.Task{OrderingID: "mail-later", ScheduledAt: time.Now().Add(time.Hour), Kind: "email"})
	require.NoError(t, err)
	reloadUntil(t, b, srv.URL+"/ui/", `document.querySelectorAll("#pause-email").length`) // the leader's next count
	follow(t, b, "#pause-email")
	do(chromedp.WaitVisible("#resume-email"))
	kinds, err := client.PausedKinds(ctx)
	require.NoError(t, err)
	require.Len(t, kinds, 1)
	// A charge due just after the email runs: the node claimed past the
	// email, which it would have started had its kind not been paused.
	mailAt := time.Now()
	_, err = client.Schedule(ctx, pgsched.Task{OrderingID: "mail-2", ScheduledAt: mailAt, Kind: "email"})
	require.NoError(t, err)
	_, err = client.Schedule(ctx, pgsched.Task{OrderingID: "order-2", ScheduledAt: mailAt.Add(time.Millisecond), Kind: "charge"})
	require.NoError(t, err)
	for deadline := time.Now().Add(pgtest.Patience(20 * time.Second)); ; time.Sleep(20 * time.Millisecond) {
		var done int
		require.NoError(t, db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+db.Schema+".completions WHERE ordering_id = 'order-2'").Scan(&done))
		if done == 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the charge due after the email did not complete")
	}
	select {
	case id := <-emails:
		t.Fatalf("%s started while email is paused", id)
	default:
	}
	follow(t, b, "#resume-email")
	do(chromedp.WaitVisible("#pause-email"))
	select {
	case id := <-emails:
		require.Equal(t, "mail-2", id)
	case <-time.After(pgtest.Patience(20 * time.Second)):
		t.Fatal("mail-2 did not run after the resume")
	}

	// Cancel a running task from its page: the handler's context ends
	// with ErrTaskCancelled and the task is dead, not retried.
	slowAt := time.Now().Truncate(time.Millisecond)
	_, err = client.Schedule(ctx, pgsched.Task{OrderingID: "long-report", ScheduledAt: slowAt, Kind: "slow"})
	require.NoError(t, err)
	<-slowStarted
	keyPage := srv.URL + "/ui/tasks/key?" + url.Values{"ordering_id": {"long-report"}, "scheduled_at": {slowAt.UTC().Format(time.RFC3339Nano)}}.Encode()
	do(chromedp.Navigate(keyPage), chromedp.WaitVisible("#state-running"))
	follow(t, b, "#cancel")
	select {
	case cause := <-slowEnded:
		require.ErrorIs(t, cause, pgsched.ErrTaskCancelled)
	case <-time.After(pgtest.Patience(20 * time.Second)):
		t.Fatal("the cancelled handler did not end")
	}
	reloadUntil(t, b, keyPage, `document.querySelectorAll("#state-dead").length`) // the outcome's write

	// Pause and resume a recurring schedule from its page.
	_, err = client.UpsertRecurring(ctx, pgsched.Recurring{Name: "nightly", Spec: "0 3 * * *", Kind: "email"})
	require.NoError(t, err)
	scheduleState := func() bool {
		list, err := client.ListRecurring(ctx)
		require.NoError(t, err)
		require.Len(t, list, 1)
		return list[0].Paused
	}
	do(chromedp.Navigate(srv.URL+"/ui/recurring"), chromedp.WaitVisible("#pause-schedule-nightly"))
	follow(t, b, "#pause-schedule-nightly")
	do(chromedp.WaitVisible("#resume-schedule-nightly"))
	require.True(t, scheduleState(), "paused from the page")
	follow(t, b, "#resume-schedule-nightly")
	do(chromedp.WaitVisible("#pause-schedule-nightly"))
	require.False(t, scheduleState(), "resumed from the page")

	// Bulk: delete every dead task of one kind from the filtered dead page.
	for i := range 3 {
		_, err = client.Schedule(ctx, pgsched.Task{OrderingID: fmt.Sprintf("doomed-%d", i), ScheduledAt: time.Now(), Kind: "doomed"})
		require.NoError(t, err)
	}
	deadOf := func(kind string) int {
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+db.Schema+".dead_tasks WHERE kind = $1", kind).Scan(&n))
		return n
	}
	for deadline := time.Now().Add(pgtest.Patience(20 * time.Second)); deadOf("doomed") < 3; time.Sleep(20 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the doomed tasks did not die")
	}
	do(chromedp.Navigate(srv.URL+"/ui/dead?kind=doomed"), chromedp.WaitVisible("#delete-all"))
	follow(t, b, "#delete-all")
	for deadline := time.Now().Add(pgtest.Patience(20 * time.Second)); deadOf("doomed") > 0; time.Sleep(20 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the page's delete-all did not delete")
	}
	reloadUntil(t, b, srv.URL+"/ui/dead?kind=doomed", `document.querySelectorAll("#dead td.empty").length`)
	require.Equal(t, 1, deadOf("slow"), "other kinds untouched")
}
