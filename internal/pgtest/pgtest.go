package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/pgsched/pgsched/internal/localpg"
	"github.com/pgsched/pgsched/internal/sqlschema"
)

const (
	// EnvDatabaseURL names the variable that points tests at an existing server.
	EnvDatabaseURL = "TEST_DATABASE_URL"
	// EnvNoDocker, when set to a non-empty value other than "0", skips the
	// Docker probe and goes straight to a local server.
	EnvNoDocker = "PGTEST_NO_DOCKER"

	dockerImage           = "postgres:15-alpine"
	dockerProbeTimeout    = 5 * time.Second
	containerStartTimeout = 3 * time.Minute
	localStartTimeout     = 2 * time.Minute
	stopTimeout           = time.Minute
	poolMaxConns          = 20

	// maxIdentLen is the longest name UniqueName returns: the longest
	// schema name pgsched accepts (its notification channels append to it).
	maxIdentLen = sqlschema.MaxLen
)

// server is the PostgreSQL server chosen for this test binary.
type server struct {
	url    string
	source string                          // human-readable description, for the log line
	stop   func(ctx context.Context) error // nil when we started nothing
}

var (
	mainCalled atomic.Bool

	serverOnce sync.Once
	srv        *server
	srvErr     error

	poolOnce sync.Once
	pool     *pgxpool.Pool
	poolErr  error

	shutdownOnce sync.Once
	shutdownErr  error

	namesMu sync.Mutex
	names   = map[string]struct{}{}
)

// Main runs the tests and then stops whatever server this test binary
// started. Use it as
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// It also stops the server when the binary is interrupted (SIGINT, SIGTERM).
// A binary killed by go test's -timeout cannot clean up; the localpg server
// is then left running in its temp directory (containers are reaped by
// testcontainers' Ryuk).
func Main(m *testing.M) {
	mainCalled.Store(true)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig, ok := <-sigs
		if !ok {
			return
		}
		fmt.Fprintf(os.Stderr, "pgtest: got %v, stopping the test database server\n", sig)
		if err := shutdown(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		}
		os.Exit(1)
	}()

	code := m.Run()

	signal.Stop(sigs)
	if err := shutdown(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
	}
	os.Exit(code)
}

// shutdown closes the shared pool and stops the server, once. It waits for
// a server start that is still in progress, so nothing it starts leaks.
func shutdown() error {
	shutdownOnce.Do(func() {
		poolOnce.Do(func() { poolErr = errors.New("pgtest: tests are over") })
		if pool != nil {
			pool.Close()
		}
		serverOnce.Do(func() { srvErr = errors.New("pgtest: tests are over") })
		if srv != nil && srv.stop != nil {
			ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
			defer cancel()
			if err := srv.stop(ctx); err != nil {
				shutdownErr = fmt.Errorf("stopping %s: %w", srv.source, err)
			}
		}
	})
	return shutdownErr
}

// ServerURL returns a connection string for this test binary's PostgreSQL
// server, choosing and starting it on first use (see the package
// documentation). The role is a superuser unless TEST_DATABASE_URL says
// otherwise. If no server can be had, every caller fails with the same
// explanation.
func ServerURL(tb testing.TB) string {
	tb.Helper()
	u, err := URL()
	if err != nil {
		tb.Fatalf("%v", err)
	}
	return u
}

// URL is ServerURL for code that has no testing.TB: Example functions.
func URL() (string, error) {
	if !mainCalled.Load() {
		return "", errors.New("pgtest: this test package has no `func TestMain(m *testing.M) { pgtest.Main(m) }`; " +
			"add it so the PostgreSQL server pgtest may start is stopped after the tests")
	}
	serverOnce.Do(func() {
		srv, srvErr = chooseServer()
		if srvErr == nil {
			fmt.Fprintf(os.Stderr, "pgtest: using %s\n", srv.source)
		}
	})
	if srvErr != nil {
		return "", srvErr
	}
	return srv.url, nil
}

// AdminPool returns a pool (at most 20 connections) to ServerURL's server,
// shared by the whole test binary, for creating and dropping schemas and
// databases. Do not Close it; Main does.
func AdminPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	u := ServerURL(tb)
	poolOnce.Do(func() { pool, poolErr = newPool(u) })
	if poolErr != nil {
		tb.Fatalf("%v", poolErr)
	}
	return pool
}

func newPool(u string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		return nil, fmt.Errorf("pgtest: parse server URL: %w", err)
	}
	cfg.MaxConns = poolMaxConns
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgtest: create admin pool: %w", err)
	}
	if err := p.Ping(ctx); err != nil {
		p.Close()
		return nil, fmt.Errorf("pgtest: connect admin pool to %s: %w", redact(u), err)
	}
	return p, nil
}

// chooseServer implements the three-step choice from the package doc.
func chooseServer() (*server, error) {
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		return &server{url: u, source: fmt.Sprintf("%s=%s", EnvDatabaseURL, redact(u))}, nil
	}

	var reasons []string
	dockerErr := errors.New("skipped because " + EnvNoDocker + " is set")
	if v := os.Getenv(EnvNoDocker); v == "" || v == "0" {
		dockerErr = probeDocker()
	}
	if dockerErr == nil {
		s, err := startContainer()
		if err == nil {
			return s, nil
		}
		dockerErr = fmt.Errorf("Docker answered but starting %s failed: %w", dockerImage, err)
	}
	reasons = append(reasons, "Docker: "+oneLine(dockerErr))

	s, err := startLocal()
	if err == nil {
		s.source += " (no " + EnvDatabaseURL + "; " + reasons[0] + ")"
		return s, nil
	}
	reasons = append(reasons, "local PostgreSQL: "+err.Error())

	return nil, fmt.Errorf("pgtest: no PostgreSQL server available for tests.\n"+
		"  %s is not set\n  %s\n\n"+
		"Fix it in one of these ways:\n"+
		"  - point the tests at a server: export %s='postgres://USER:PASSWORD@HOST:5432/DB?sslmode=disable' "+
		"(the role must be able to create schemas and databases)\n"+
		"  - start a Docker engine (tests then run %s via testcontainers)\n"+
		"  - install the PostgreSQL server binaries so a private server can be started: apt-get install postgresql",
		EnvDatabaseURL, strings.Join(reasons, "\n  "), EnvDatabaseURL, dockerImage)
}

// probeDocker reports whether a Docker engine answers. testcontainers'
// discovery uses context.Background internally and blocks for as long as a
// dead-but-listening socket keeps it waiting, and may panic on odd
// configurations, so it runs in a goroutine under a timeout and recover.
// If it times out, the goroutine is abandoned.
func probeDocker() error {
	ctx, cancel := context.WithTimeout(context.Background(), dockerProbeTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("testcontainers panicked: %v", r)
			}
		}()
		p, err := testcontainers.NewDockerProvider()
		if err != nil {
			done <- err
			return
		}
		done <- p.Health(ctx) // Health also closes the provider
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("no answer from the Docker engine within %v", dockerProbeTimeout)
	}
}

func startContainer() (s *server, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("testcontainers panicked: %v", r)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), containerStartTimeout)
	defer cancel()
	ctr, err := tcpostgres.Run(ctx, dockerImage,
		tcpostgres.BasicWaitStrategies(),
		// Same non-durable, many-connections profile as the localpg server.
		testcontainers.WithCmd("postgres",
			"-c", "fsync=off",
			"-c", "synchronous_commit=off",
			"-c", "full_page_writes=off",
			"-c", "max_connections=400"),
	)
	if err != nil {
		_ = testcontainers.TerminateContainer(ctr)
		return nil, err
	}
	u, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = testcontainers.TerminateContainer(ctr)
		return nil, fmt.Errorf("container connection string: %w", err)
	}
	id := ctr.GetContainerID()
	if len(id) > 12 {
		id = id[:12]
	}
	return &server{
		url:    u,
		source: fmt.Sprintf("Docker container %s (%s) at %s", dockerImage, id, redact(u)),
		stop: func(ctx context.Context) error {
			return testcontainers.TerminateContainer(ctr, testcontainers.StopContext(ctx))
		},
	}, nil
}

func startLocal() (*server, error) {
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("create temp dir: %w", err)
	}
	// When root, PostgreSQL runs as user postgres and must traverse this.
	if err := os.Chmod(dir, 0o755); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("chmod temp dir: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), localStartTimeout)
	defer cancel()
	pg, err := localpg.Start(ctx, localpg.Options{
		DataDir: filepath.Join(dir, "data"),
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return &server{
		url:    pg.URL(),
		source: fmt.Sprintf("local PostgreSQL server at %s (data in %s)", pg.URL(), pg.DataDir()),
		stop: func(ctx context.Context) error {
			if err := pg.Stop(ctx); err != nil {
				return fmt.Errorf("%w (data left in %s)", err, dir)
			}
			if err := os.RemoveAll(dir); err != nil {
				return fmt.Errorf("remove %s: %w", dir, err)
			}
			return nil
		},
	}, nil
}

// UniqueName returns a fresh lowercase SQL identifier for a schema, database
// or table: prefix, the test's name and 8 random hex digits, joined by
// underscores, sanitized to [a-z0-9_] and cut to at most 63 bytes. It never
// returns the same name twice within a test binary, needs no quoting, and
// does not start with a digit.
func UniqueName(tb testing.TB, prefix string) string {
	tb.Helper()
	return uniqueName(prefix, tb.Name())
}

// FreshName is UniqueName for code that has no testing.TB, such as Example
// functions: prefix and 8 random hex digits, so runs sharing a server do
// not collide.
func FreshName(prefix string) string { return uniqueName(prefix, "") }

func uniqueName(prefix, test string) string {
	p := sanitizeIdent(prefix)
	if p == "" {
		p = "t"
	}
	if p[0] >= '0' && p[0] <= '9' {
		p = "t_" + p
	}
	testName := sanitizeIdent(test)

	const suffixLen = 1 + 8 // "_" + 8 hex digits
	budget := maxIdentLen - suffixLen
	head := truncateIdent(p, budget)
	if testName != "" && len(head)+1 < budget {
		head = truncateIdent(head+"_"+testName, budget)
	}

	namesMu.Lock()
	defer namesMu.Unlock()
	for {
		var b [4]byte
		_, _ = rand.Read(b[:]) // never fails on supported platforms
		name := head + "_" + hex.EncodeToString(b[:])
		if _, dup := names[name]; !dup {
			names[name] = struct{}{}
			return name
		}
	}
}

var nonIdent = regexp.MustCompile(`[^a-z0-9]+`)

// sanitizeIdent lowercases s and replaces every run of other characters with
// one underscore, trimming underscores at both ends.
func sanitizeIdent(s string) string {
	return strings.Trim(nonIdent.ReplaceAllString(strings.ToLower(s), "_"), "_")
}

func truncateIdent(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.TrimRight(s, "_")
}

var dsnPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// redact hides the password in a URL or keyword/value connection string.
func redact(conn string) string {
	if u, err := url.Parse(conn); err == nil && u.Scheme != "" {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	return dsnPassword.ReplaceAllString(conn, "${1}xxxxx")
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
