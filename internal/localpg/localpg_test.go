package localpg

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// tempDir returns a fresh directory that the postgres OS user can traverse
// even when the test runs as root (t.TempDir's parent is mode 0700).
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "localpg-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func start(t *testing.T, opts Options) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	srv, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(context.Background()); err != nil {
			t.Errorf("cleanup Stop: %v", err)
		}
	})
	return srv
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func TestStartQueryStop(t *testing.T) {
	ctx := context.Background()
	dataDir := filepath.Join(tempDir(t), "data")
	srv := start(t, Options{DataDir: dataDir})

	wantPrefix := "postgres://postgres@127.0.0.1:"
	if !strings.HasPrefix(srv.URL(), wantPrefix) || !strings.HasSuffix(srv.URL(), "/postgres?sslmode=disable") {
		t.Fatalf("URL() = %q", srv.URL())
	}
	if srv.Port() <= 0 {
		t.Fatalf("Port() = %d", srv.Port())
	}

	conn := connect(t, srv.URL())
	var one int
	if err := conn.QueryRow(ctx, "select 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("select 1 = %d, %v", one, err)
	}
	for setting, want := range map[string]string{
		"fsync":              "off",
		"synchronous_commit": "off",
		"full_page_writes":   "off",
		"max_connections":    "400",
		"shared_buffers":     "256MB",
		"listen_addresses":   "127.0.0.1",
		"server_encoding":    "UTF8",
	} {
		var got string
		if err := conn.QueryRow(ctx, "select current_setting($1)", setting).Scan(&got); err != nil {
			t.Fatalf("current_setting(%s): %v", setting, err)
		}
		if got != want {
			t.Errorf("%s = %q, want %q", setting, got, want)
		}
	}
	_ = conn.Close(ctx)

	if err := srv.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := srv.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "postmaster.pid")); !os.IsNotExist(err) {
		t.Fatalf("postmaster.pid still present after Stop (err=%v)", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if c, err := pgx.Connect(cctx, srv.URL()); err == nil {
		_ = c.Close(ctx)
		t.Fatal("connect succeeded after Stop")
	}
}

func TestRestartReusesClusterAndAdoptsRunningServer(t *testing.T) {
	ctx := context.Background()
	dataDir := filepath.Join(tempDir(t), "nested", "data")

	first := start(t, Options{DataDir: dataDir, Durable: true})
	if _, err := connect(t, first.URL()).Exec(ctx, "create table kept (id int)"); err != nil {
		t.Fatal(err)
	}

	// A second Start on a running cluster adopts it and must not stop it.
	adopted := start(t, Options{DataDir: dataDir})
	if adopted.URL() != first.URL() {
		t.Fatalf("adopted URL %q, want %q", adopted.URL(), first.URL())
	}
	if err := adopted.Stop(ctx); err != nil {
		t.Fatalf("Stop adopted: %v", err)
	}
	if _, err := connect(t, first.URL()).Exec(ctx, "select 1"); err != nil {
		t.Fatalf("server went away after stopping the adopted handle: %v", err)
	}
	if err := first.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	// Restart on the existing cluster: data survives, and the previous
	// port is reused when it is still free.
	again := start(t, Options{DataDir: dataDir, Durable: true})
	if again.Port() != first.Port() {
		t.Logf("port changed across restart: %d -> %d (previous port was taken)", first.Port(), again.Port())
	}
	var n int
	if err := connect(t, again.URL()).QueryRow(ctx, "select count(*) from kept").Scan(&n); err != nil {
		t.Fatalf("table from the first run is missing: %v", err)
	}
	conf, err := os.ReadFile(filepath.Join(dataDir, "postgresql.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if c := strings.Count(string(conf), confBegin); c != 1 {
		t.Fatalf("postgresql.conf has %d managed blocks, want 1", c)
	}
	if strings.Contains(string(conf), "fsync = off") {
		t.Fatal("durable restart still has fsync = off")
	}
}

func TestExplicitPort(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	srv := start(t, Options{DataDir: filepath.Join(tempDir(t), "data"), Port: port})
	if srv.Port() != port {
		t.Fatalf("Port() = %d, want %d", srv.Port(), port)
	}
	connect(t, srv.URL())
}

func TestRefusesNonEmptyNonClusterDir(t *testing.T) {
	dataDir := filepath.Join(tempDir(t), "data")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "precious.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Start(context.Background(), Options{DataDir: dataDir})
	if err == nil || !strings.Contains(err.Error(), "neither empty nor a PostgreSQL cluster") {
		t.Fatalf("Start = %v, want refusal", err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "precious.txt")); err != nil {
		t.Fatalf("existing file was touched: %v", err)
	}
}

func TestManagedConfigBlock(t *testing.T) {
	base := "port = 5432\n#port = 1\n"
	block := confBegin + "\nport = 6000\n" + confEnd + "\n"
	conf := stripManagedBlock(base+block) + confBegin + "\nport = 7000\n" + confEnd + "\n"
	if strings.Count(conf, confBegin) != 1 {
		t.Fatalf("managed block not replaced:\n%s", conf)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "postgresql.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := configuredPort(dir); got != 7000 {
		t.Fatalf("configuredPort = %d, want 7000", got)
	}
	if got := stripManagedBlock("a = 1"); got != "a = 1\n" {
		t.Fatalf("stripManagedBlock adds newline: %q", got)
	}
}

func TestFindBinDir(t *testing.T) {
	dir, err := findBinDir(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		if !isExecutable(filepath.Join(dir, name)) {
			t.Errorf("%s missing from %s", name, dir)
		}
	}
}

func TestFindBinDirMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	old := debianBinGlob
	debianBinGlob = filepath.Join(t.TempDir(), "*", "bin")
	t.Cleanup(func() { debianBinGlob = old })

	_, err := Start(context.Background(), Options{DataDir: filepath.Join(t.TempDir(), "data")})
	if err == nil || !strings.Contains(err.Error(), "apt-get install postgresql") {
		t.Fatalf("Start without binaries = %v, want an install hint", err)
	}
	t.Log(err)
}
