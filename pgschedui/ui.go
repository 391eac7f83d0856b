// Package pgschedui is pgsched's web console: pages an on-call engineer
// opens first to see where the work is, whether it is late, who runs it
// and what died. It is an http.Handler over a pool and a schema, so the
// worker serves it under /ui/ and a program can mount it in its own admin
// server without running a worker. Pages are rendered on the server from
// embedded templates and one stylesheet, charts included (SVG): no build
// step, no script, works offline. It reads only, unless Config.Token
// enables its actions (actions.go). It shows no secrets (no connection
// string, no webhook credentials: nothing of the worker's configuration).
//
// No page counts tasks: counts per kind are the leader's (pgsched.kinds),
// history is what nodes add per minute (pgsched.throughput), and lists
// follow an index's order, so pages stay fast with millions of tasks.
package pgschedui

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/store"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Config configures the console.
type Config struct {
	// Schema holds pgsched's tables. Defaults to "pgsched".
	Schema string
	// Prefix is the path the console is mounted at, with a trailing slash.
	// Defaults to "/ui/".
	Prefix string
	// Token enables actions (retry and delete dead tasks, pause and resume
	// kinds and recurring schedules, cancel running tasks): a person signs
	// in with it once, and each action is a POST carrying a CSRF token
	// derived from it. At least MinTokenLen bytes; empty: the console only
	// reads.
	Token string
	// Logger receives failed page loads, every action with what it
	// changed, failed sign-ins (the address, never the guess) and POSTs
	// refused as coming from another origin. Defaults to discarding.
	Logger *slog.Logger
}

// MinTokenLen is the shortest Config.Token New accepts: sign-in is
// throttled, but a short token is still a guessable one.
const MinTokenLen = 16

// ErrShortToken is returned by New for a non-empty Config.Token shorter
// than MinTokenLen.
var ErrShortToken = fmt.Errorf("pgschedui: Config.Token must be at least %d bytes long", MinTokenLen)

type console struct {
	pool   *pgxpool.Pool
	store  store.Store
	client *pgsched.Client
	prefix string
	logger *slog.Logger
	pages  map[string]*template.Template
	token  string
	mux    *http.ServeMux
	// crossOrigin refuses POSTs from pages of other origins.
	crossOrigin *http.CrossOriginProtection
	signins     *throttle
}

// ServeHTTP serves the console's pages and actions.
func (c *console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.mux.ServeHTTP(w, r) }

// New returns the console's handler. Mount it at cfg.Prefix:
//
//	mux.Handle("/ui/", h)
func New(pool *pgxpool.Pool, cfg Config) (http.Handler, error) {
	if pool == nil {
		return nil, errors.New("pgschedui: New needs a pool")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "/ui/"
	}
	if !strings.HasPrefix(cfg.Prefix, "/") || !strings.HasSuffix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("pgschedui: Prefix %q must start and end with /", cfg.Prefix)
	}
	if cfg.Token != "" && len(cfg.Token) < MinTokenLen {
		return nil, ErrShortToken
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	st, err := store.New(cfg.Schema)
	if err != nil {
		return nil, fmt.Errorf("pgschedui: %w", err)
	}
	client, err := pgsched.NewClient(pool, pgsched.ClientConfig{Schema: cfg.Schema})
	if err != nil {
		return nil, fmt.Errorf("pgschedui: %w", err)
	}
	c := &console{pool: pool, store: st, client: client, prefix: cfg.Prefix, logger: cfg.Logger, pages: map[string]*template.Template{},
		token: cfg.Token, crossOrigin: http.NewCrossOriginProtection(), signins: newThrottle()}
	funcs := template.FuncMap{
		"since": func(t time.Time) string {
			if t.IsZero() {
				return "—"
			}
			return time.Since(t).Round(time.Second).String()
		},
		"ts": func(t time.Time) string {
			if t.IsZero() {
				return "—"
			}
			return t.UTC().Format("2006-01-02 15:04:05.000Z")
		},
		"secs": func(s float64) string {
			return (time.Duration(s * float64(time.Second))).Round(time.Millisecond).String()
		},
		"p":      func(path string) string { return cfg.Prefix + path },
		"hue":    hue,
		"pretty": pretty,
		"keyURL": func(ordering string, at time.Time, unique string) string {
			return cfg.Prefix + "tasks/key?" + url.Values{"ordering_id": {ordering}, "scheduled_at": {at.UTC().Format(time.RFC3339Nano)},
				"uniqueness_key": {unique}}.Encode()
		},
		"ms": func(v float64) string { return fmt.Sprintf("%.1f ms", v) },
	}
	for _, page := range []string{"overview", "kinds", "cluster", "tasks", "task", "dead", "deadtask", "recurring"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/parts.html",
			"templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("pgschedui: template %s: %w", page, err)
		}
		c.pages[page] = t
	}
	static, _ := fs.Sub(staticFiles, "static")
	mux := http.NewServeMux()
	c.mux = mux
	mux.Handle("GET "+cfg.Prefix+"static/", http.StripPrefix(cfg.Prefix+"static/", http.FileServerFS(static)))
	mux.HandleFunc("GET "+cfg.Prefix+"{$}", c.overview)
	mux.HandleFunc("GET "+cfg.Prefix+"kinds", c.kinds)
	mux.HandleFunc("GET "+cfg.Prefix+"cluster", c.cluster)
	mux.HandleFunc("GET "+cfg.Prefix+"tasks", c.tasks)
	mux.HandleFunc("GET "+cfg.Prefix+"tasks/key", c.task)
	mux.HandleFunc("GET "+cfg.Prefix+"dead", c.dead)
	mux.HandleFunc("GET "+cfg.Prefix+"dead/{id}", c.deadTask)
	mux.HandleFunc("GET "+cfg.Prefix+"recurring", c.recurring)
	mux.HandleFunc("POST "+cfg.Prefix+"signin", c.signIn)
	mux.HandleFunc("POST "+cfg.Prefix+"dead/retry", c.action(c.retryDead))
	mux.HandleFunc("POST "+cfg.Prefix+"dead/delete", c.action(c.deleteDead))
	mux.HandleFunc("POST "+cfg.Prefix+"dead/retry-kind", c.action(c.retryDeadKind))
	mux.HandleFunc("POST "+cfg.Prefix+"dead/delete-kind", c.action(c.deleteDeadKind))
	mux.HandleFunc("POST "+cfg.Prefix+"tasks/cancel", c.action(c.cancelRunning))
	mux.HandleFunc("POST "+cfg.Prefix+"recurring/pause", c.action(c.pauseRecurring))
	mux.HandleFunc("POST "+cfg.Prefix+"recurring/resume", c.action(c.resumeRecurring))
	mux.HandleFunc("POST "+cfg.Prefix+"kinds/pause", c.action(c.pauseKind))
	mux.HandleFunc("POST "+cfg.Prefix+"kinds/resume", c.action(c.resumeKind))
	return c, nil
}

// hue gives each node a stable color, so a partition grid shows owners.
func hue(node string) int {
	h := 0
	for _, r := range node {
		h = (h*31 + int(r)) % 360
	}
	return h
}

func (c *console) render(w http.ResponseWriter, r *http.Request, page, title string, data map[string]any, err error) {
	if data == nil {
		data = map[string]any{}
	}
	data["Title"], data["Page"] = title, page
	data["Actions"], data["SignedIn"] = c.token != "", c.signedIn(r)
	data["CSRF"], data["Self"] = c.csrf(), r.URL.RequestURI()
	status := http.StatusOK
	if nf, _ := data["NotFound"].(bool); nf {
		status = http.StatusNotFound
	}
	var bad *badRequest
	switch {
	case errors.As(err, &bad):
		data["Error"], status = err.Error(), http.StatusBadRequest
	case err != nil:
		c.logger.Warn("console page failed", "page", page, "error", err)
		data["Error"], status = "could not read the database: "+err.Error(), http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'")
	w.Header().Set("X-Frame-Options", "DENY")
	w.WriteHeader(status)
	if err := c.pages[page].Execute(w, data); err != nil {
		c.logger.Warn("rendering console page failed", "page", page, "error", err)
	}
}

func (c *console) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), 10*time.Second)
}

// read runs a page's queries in one read-only transaction: one snapshot
// for the page, no JIT (whose compile time dwarfs these queries when the
// planner expects many rows) and a statement timeout, so a page never
// holds a connection of the pool it shares with the application long.
func (c *console) read(r *http.Request, f func(ctx context.Context, db store.DBTX) error) error {
	ctx, cancel := c.ctx(r)
	defer cancel()
	return pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL jit = off; SET LOCAL statement_timeout = '5s'"); err != nil {
			return err
		}
		return f(ctx, tx)
	})
}

// overview: the last hour's throughput and lateness, the totals of the
// last count per kind, and the oldest due task's wait.
func (c *console) overview(w http.ResponseWriter, r *http.Request) {
	var (
		data = map[string]any{}
		late float64
		rows []store.StatsMinute
	)
	err := c.read(r, func(ctx context.Context, db store.DBTX) error {
		if err := c.kindData(ctx, db, data); err != nil {
			return err
		}
		var err error
		if late, err = c.store.ConsoleLateness(ctx, db); err != nil {
			return err
		}
		rows, err = c.store.StatsHour(ctx, db)
		return err
	})
	now := time.Now()
	if len(rows) > 0 {
		now = rows[0].DbNow
	}
	data["Throughput"], data["LatenessChart"] = hour(rows, now)
	data["Lateness"] = late
	c.render(w, r, "overview", "Overview", data, err)
}

func (c *console) kinds(w http.ResponseWriter, r *http.Request) {
	data := map[string]any{}
	err := c.read(r, func(ctx context.Context, db store.DBTX) error {
		limits, err := c.store.Limits(ctx, db)
		if err != nil {
			return err
		}
		data["Limits"] = limits
		weights, err := c.store.GroupWeights(ctx, db)
		if err != nil {
			return err
		}
		data["Weights"] = weights
		return c.kindData(ctx, db, data)
	})
	c.render(w, r, "kinds", "Kinds", data, err)
}

// kindData is the leader's last count per kind, totalled, and its age.
func (c *console) kindData(ctx context.Context, db store.DBTX, data map[string]any) error {
	kinds, err := c.store.ConsoleKinds(ctx, db)
	if err != nil {
		return err
	}
	var total store.ConsoleKind
	for _, k := range kinds {
		total.Pending += k.Pending
		total.Due += k.Due
		total.Running += k.Running
		total.Dead += k.Dead
	}
	counted, ok, err := c.store.LastCounted(ctx, db)
	data["Kinds"], data["Total"], data["Counted"] = kinds, total, ok
	if ok {
		data["CountedAgo"] = counted.DbNow.Sub(counted.CountedAt).Round(100 * time.Millisecond).String()
		took := time.Duration(counted.TookSeconds * float64(time.Second)).Round(time.Millisecond)
		data["CountTook"] = took.String()
		if took == 0 {
			data["CountTook"] = "under 1ms"
		}
	}
	return err
}

func (c *console) cluster(w http.ResponseWriter, r *http.Request) {
	var (
		nodes []store.ConsoleNode
		parts []store.ConsolePartition
	)
	err := c.read(r, func(ctx context.Context, db store.DBTX) (err error) {
		if nodes, err = c.store.ConsoleNodes(ctx, db); err != nil {
			return err
		}
		parts, err = c.store.ConsolePartitions(ctx, db)
		return err
	})
	c.render(w, r, "cluster", "Cluster", map[string]any{"Nodes": nodes, "Partitions": parts}, err)
}

func (c *console) tasks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := pgsched.TaskFilter{OrderingID: q.Get("ordering_id"), Kind: q.Get("kind"), State: pgsched.TaskState(q.Get("state"))}
	if f.State != "" && f.State != pgsched.StatePending && f.State != pgsched.StateRunning {
		c.render(w, r, "tasks", "Tasks", map[string]any{"Filter": f}, &badRequest{fmt.Sprintf("state %q is neither pending nor running", f.State)})
		return
	}
	var tasks []store.Listed
	err := c.read(r, func(ctx context.Context, db store.DBTX) (err error) {
		tasks, err = c.store.ConsoleTasks(ctx, db, f.OrderingID, f.Kind, string(f.State), 200)
		return err
	})
	c.render(w, r, "tasks", "Tasks", map[string]any{"Tasks": tasks, "Filter": f}, err)
}

// task shows one key wherever it is: pending or running, completed, dead.
func (c *console) task(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	k := store.Key{OrderingID: q.Get("ordering_id"), UniquenessKey: q.Get("uniqueness_key")}
	at, err := time.Parse(time.RFC3339Nano, q.Get("scheduled_at"))
	if err != nil || k.OrderingID == "" {
		c.render(w, r, "task", "Task", map[string]any{"Key": k},
			&badRequest{fmt.Sprintf("a task is named by ordering_id and scheduled_at (RFC 3339), got %q and %q", k.OrderingID, q.Get("scheduled_at"))})
		return
	}
	k.ScheduledAt = at
	var rows []store.ConsoleKeyRow
	err = c.read(r, func(ctx context.Context, db store.DBTX) (err error) {
		rows, err = c.store.ConsoleTaskKey(ctx, db, k)
		return err
	})
	c.render(w, r, "task", "Task", map[string]any{"Key": k, "Rows": rows, "NotFound": err == nil && len(rows) == 0}, err)
}

func (c *console) deadTask(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		c.render(w, r, "deadtask", "Dead task", nil, &badRequest{fmt.Sprintf("%q is not a task id", r.PathValue("id"))})
		return
	}
	var rows []store.ConsoleDeadTask
	err = c.read(r, func(ctx context.Context, db store.DBTX) (err error) {
		rows, err = c.store.ConsoleDeadTask(ctx, db, id)
		return err
	})
	data := map[string]any{"ID": id}
	if len(rows) > 0 {
		data["Task"] = rows[0]
	} else if err == nil {
		data["NotFound"] = true
	}
	c.render(w, r, "deadtask", "Dead task", data, err)
}

// badRequest is a page's error that is the request's fault.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

// pretty indents a JSON payload for reading.
func pretty(b []byte) string {
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") != nil {
		return string(b)
	}
	return out.String()
}

func (c *console) dead(w http.ResponseWriter, r *http.Request) {
	kind := r.URL.Query().Get("kind")
	var (
		dead []store.ConsoleDead
		now  time.Time
	)
	err := c.read(r, func(ctx context.Context, db store.DBTX) (err error) {
		if now, err = c.store.ConsoleNow(ctx, db); err != nil {
			return err
		}
		dead, err = c.store.ConsoleDead(ctx, db, kind, 200)
		return err
	})
	c.render(w, r, "dead", "Dead", map[string]any{"Dead": dead, "Kind": kind, "AsOf": now.UTC().Format(time.RFC3339Nano)}, err)
}

func (c *console) recurring(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	list, err := c.client.ListRecurring(ctx)
	c.render(w, r, "recurring", "Recurring", map[string]any{"Schedules": list}, err)
}
