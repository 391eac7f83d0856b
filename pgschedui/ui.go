// Package pgschedui is pgsched's web console: pages an on-call engineer
// opens first to see where the work is, whether it is late, who runs it
// and what died. It is an http.Handler over a pool and a schema, so the
// worker serves it under /ui/ and a program can mount it in its own admin
// server without running a worker. Pages are rendered on the server from
// embedded templates and one stylesheet: no build step, no script, works
// offline. This version reads only; it shows no secrets (no connection
// string, no webhook credentials: nothing of the worker's configuration).
package pgschedui

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

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
	// kinds): a person signs in with it once, and each action is a POST
	// carrying a CSRF token derived from it. Empty: the console only reads.
	Token string
	// Logger receives failed page loads and every action with what it
	// changed. Defaults to discarding.
	Logger *slog.Logger
}

type console struct {
	pool   *pgxpool.Pool
	store  *store.Store
	client *pgsched.Client
	prefix string
	logger *slog.Logger
	pages  map[string]*template.Template
	token  string
}

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
		token: cfg.Token}
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
		"p":   func(path string) string { return cfg.Prefix + path },
		"hue": hue,
	}
	for _, page := range []string{"overview", "cluster", "tasks", "dead", "recurring"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("pgschedui: template %s: %w", page, err)
		}
		c.pages[page] = t
	}
	static, _ := fs.Sub(staticFiles, "static")
	mux := http.NewServeMux()
	mux.Handle("GET "+cfg.Prefix+"static/", http.StripPrefix(cfg.Prefix+"static/", http.FileServerFS(static)))
	mux.HandleFunc("GET "+cfg.Prefix+"{$}", c.overview)
	mux.HandleFunc("GET "+cfg.Prefix+"kinds", c.overview)
	mux.HandleFunc("GET "+cfg.Prefix+"cluster", c.cluster)
	mux.HandleFunc("GET "+cfg.Prefix+"tasks", c.tasks)
	mux.HandleFunc("GET "+cfg.Prefix+"dead", c.dead)
	mux.HandleFunc("GET "+cfg.Prefix+"recurring", c.recurring)
	mux.HandleFunc("POST "+cfg.Prefix+"signin", c.signIn)
	mux.HandleFunc("POST "+cfg.Prefix+"dead/retry", c.action(c.retryDead))
	mux.HandleFunc("POST "+cfg.Prefix+"dead/delete", c.action(c.deleteDead))
	mux.HandleFunc("POST "+cfg.Prefix+"kinds/pause", c.action(c.pauseKind))
	mux.HandleFunc("POST "+cfg.Prefix+"kinds/resume", c.action(c.resumeKind))
	return mux, nil
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
	data["CSRF"] = c.csrf()
	if err != nil {
		c.logger.Warn("console page failed", "page", page, "error", err)
		data["Error"] = err.Error()
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'")
	w.Header().Set("X-Frame-Options", "DENY")
	if err := c.pages[page].Execute(w, data); err != nil {
		c.logger.Warn("rendering console page failed", "page", page, "error", err)
	}
}

func (c *console) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), 10*time.Second)
}

func (c *console) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	kinds, err := c.store.ConsoleKinds(ctx, c.pool)
	var late store.ConsoleLateness
	if err == nil {
		late, err = c.store.ConsoleLateness(ctx, c.pool)
	}
	var total store.ConsoleKind
	for _, k := range kinds {
		total.Pending += k.Pending
		total.Due += k.Due
		total.Running += k.Running
		total.Dead += k.Dead
	}
	c.render(w, r, "overview", "Overview", map[string]any{"Kinds": kinds, "Total": total, "Lateness": late}, err)
}

func (c *console) cluster(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	nodes, err := c.store.ConsoleNodes(ctx, c.pool)
	var parts []store.ConsolePartition
	if err == nil {
		parts, err = c.store.ConsolePartitions(ctx, c.pool)
	}
	c.render(w, r, "cluster", "Cluster", map[string]any{"Nodes": nodes, "Partitions": parts}, err)
}

func (c *console) tasks(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	q := r.URL.Query()
	f := pgsched.TaskFilter{OrderingID: q.Get("ordering_id"), Kind: q.Get("kind"), State: pgsched.TaskState(q.Get("state")), Limit: 200}
	tasks, err := c.client.ListTasks(ctx, f)
	c.render(w, r, "tasks", "Tasks", map[string]any{"Tasks": tasks, "Filter": f}, err)
}

func (c *console) dead(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	kind := r.URL.Query().Get("kind")
	dead, err := c.store.ConsoleDead(ctx, c.pool, kind, 200)
	c.render(w, r, "dead", "Dead", map[string]any{"Dead": dead, "Kind": kind}, err)
}

func (c *console) recurring(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	list, err := c.client.ListRecurring(ctx)
	c.render(w, r, "recurring", "Recurring", map[string]any{"Schedules": list}, err)
}
