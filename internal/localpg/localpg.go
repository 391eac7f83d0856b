package localpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options configures Start.
type Options struct {
	// DataDir is the cluster directory. It is created (mode 0700) when
	// missing; an empty directory is initialised with initdb; a directory
	// holding a cluster (PG_VERSION present) is reused. Required.
	DataDir string
	// Port is the TCP port on 127.0.0.1. 0 picks a free port (preferring the
	// port a reused cluster was configured with, if it is still free).
	Port int
	// Durable keeps PostgreSQL's crash-safety settings. When false, fsync,
	// synchronous_commit and full_page_writes are turned off (and initdb runs
	// with --no-sync), which is much faster and fine for throw-away data.
	Durable bool
	// Settings are extra postgresql.conf lines ("name = value") for the
	// managed block, e.g. "synchronous_standby_names = '*'".
	Settings []string
	// Logger receives progress messages. nil discards them.
	Logger *slog.Logger
}

// Server is a PostgreSQL server started (or adopted) by Start.
type Server struct {
	dataDir string
	binDir  string
	port    int
	extra   []string // Options.Settings
	owned   bool     // we started it, so Stop stops it
	runAs   *osUser  // nil: run binaries as the current user
	logger  *slog.Logger

	mu      sync.Mutex
	stopped bool
}

const (
	// pgCtlTimeout bounds pg_ctl start/stop (-t).
	pgCtlTimeout = 60 * time.Second
	// maxPortAttempts is how often Start retries with a fresh port when the
	// chosen one was grabbed by someone else between choosing and binding.
	maxPortAttempts = 3
	// logTailLines is how much of server.log a start failure reports.
	logTailLines = 30

	confBegin = "# BEGIN localpg managed settings (rewritten by localpg on every start)"
	confEnd   = "# END localpg managed settings"

	// maxSocketPath is the usable length of sun_path on Linux (108 minus NUL).
	maxSocketPath = 107
)

// debianBinGlob is where Debian/Ubuntu install the server binaries of each
// major version. A variable so tests can point it elsewhere.
var debianBinGlob = "/usr/lib/postgresql/*/bin"

// errPortInUse marks a start failure caused by the port being taken.
var errPortInUse = errors.New("port already in use")

// Start starts (or adopts) a PostgreSQL server for opts.DataDir. See the
// package documentation for what it does to the directory.
func Start(ctx context.Context, opts Options) (*Server, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.DataDir == "" {
		return nil, errors.New("localpg: Options.DataDir is required")
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("localpg: invalid port %d", opts.Port)
	}
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("localpg: resolve data dir: %w", err)
	}
	binDir, err := findBinDir(ctx)
	if err != nil {
		return nil, err
	}
	runAs, err := serverUser()
	if err != nil {
		return nil, err
	}
	s := &Server{dataDir: dataDir, binDir: binDir, runAs: runAs, logger: logger, extra: opts.Settings}

	// A server already running on this cluster is adopted, never restarted.
	port, running, err := runningServer(ctx, dataDir)
	if err != nil {
		return nil, err
	}
	if running {
		if opts.Port != 0 && opts.Port != port {
			logger.Warn("localpg: adopting server already running on a different port than requested",
				"data_dir", dataDir, "port", port, "requested_port", opts.Port)
		}
		logger.Info("localpg: adopting running server", "data_dir", dataDir, "port", port)
		s.port = port
		return s, nil
	}

	if err := s.prepareDataDir(); err != nil {
		return nil, err
	}
	if fileExists(filepath.Join(dataDir, "PG_VERSION")) {
		logger.Info("localpg: reusing existing cluster", "data_dir", dataDir)
	} else if err := s.initdb(ctx, opts.Durable); err != nil {
		return nil, err
	}

	for attempt := 1; ; attempt++ {
		port := opts.Port
		if port == 0 {
			if port, err = s.choosePort(); err != nil {
				return nil, err
			}
		}
		if err := s.writeConfig(port, opts.Durable); err != nil {
			return nil, err
		}
		err := s.pgCtlStart(ctx)
		if err == nil {
			s.port = port
			s.owned = true
			logger.Info("localpg: server started", "data_dir", dataDir, "port", port, "durable", opts.Durable)
			return s, nil
		}
		if opts.Port == 0 && attempt < maxPortAttempts && errors.Is(err, errPortInUse) {
			logger.Warn("localpg: port taken before the server could bind it, retrying", "port", port)
			continue
		}
		return nil, err
	}
}

// URL returns a connection string for the postgres superuser and database.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Port returns the TCP port the server listens on (127.0.0.1).
func (s *Server) Port() int { return s.port }

// DataDir returns the absolute cluster directory.
func (s *Server) DataDir() string { return s.dataDir }

// Stop shuts the server down with pg_ctl stop -m fast if Start started it; a
// server that was already running when Start was called is left alone.
// Calling Stop more than once is safe; if a stop attempt fails, a later call
// tries again.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	if !s.owned {
		s.stopped = true
		return nil
	}
	out, err := s.run(ctx, s.bin("pg_ctl"), "stop", "-D", s.dataDir, "-m", "fast", "-w",
		"-t", strconv.Itoa(int(pgCtlTimeout/time.Second)))
	if err != nil {
		if _, running, rerr := runningServer(ctx, s.dataDir); rerr == nil && !running {
			s.stopped = true // already gone (e.g. stopped out of band)
			return nil
		}
		return fmt.Errorf("localpg: pg_ctl stop: %w%s", err, formatOutput(out))
	}
	s.stopped = true
	s.logger.Info("localpg: server stopped", "data_dir", s.dataDir, "port", s.port)
	return nil
}

func (s *Server) bin(name string) string { return filepath.Join(s.binDir, name) }

// command builds an exec.Cmd for a PostgreSQL binary, running it as the
// server user when we are root.
func (s *Server) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	// The inherited working directory (e.g. /root) may not be accessible
	// to the postgres user; initdb and pg_ctl complain about that.
	cmd.Dir = "/"
	cmd.WaitDelay = 5 * time.Second
	if s.runAs != nil {
		s.runAs.apply(cmd)
	}
	return cmd
}

func (s *Server) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := s.command(ctx, name, args...)
	s.logger.Debug("localpg: exec", "cmd", cmd.String())
	out, err := cmd.CombinedOutput()
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return out, err
}

// prepareDataDir creates the data directory with the permissions PostgreSQL
// insists on and makes sure the server user owns and can reach it.
func (s *Server) prepareDataDir() error {
	dir := s.dataDir
	parent := filepath.Dir(dir)
	// Parents we create must be searchable by the postgres user.
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("localpg: create parent of data dir: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("localpg: create data dir: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("localpg: stat data dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("localpg: data dir %s is not a directory", dir)
	}
	// PostgreSQL accepts 0700 or 0750 on the data directory.
	if fi.Mode().Perm()&^0o750 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("localpg: chmod data dir: %w", err)
		}
	}
	if s.runAs != nil {
		if err := s.runAs.own(dir); err != nil {
			return err
		}
		if err := s.runAs.checkSearchable(parent); err != nil {
			return err
		}
	}
	if fileExists(filepath.Join(dir, "PG_VERSION")) {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("localpg: read data dir: %w", err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("localpg: data dir %s is neither empty nor a PostgreSQL cluster (no PG_VERSION); refusing to touch it", dir)
	}
	return nil
}

func (s *Server) initdb(ctx context.Context, durable bool) error {
	base := []string{"-D", s.dataDir, "-U", "postgres", "--auth=trust", "--encoding=UTF8"}
	if !durable {
		base = append(base, "--no-sync")
	}
	var errs []error
	for _, locale := range []string{"C.UTF-8", "C"} {
		s.logger.Info("localpg: initdb", "data_dir", s.dataDir, "locale", locale)
		args := append(append([]string(nil), base...), "--locale="+locale)
		out, err := s.run(ctx, s.bin("initdb"), args...)
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("initdb --locale=%s: %w%s", locale, err, formatOutput(out)))
		if ctx.Err() != nil {
			break
		}
		s.logger.Warn("localpg: initdb failed", "locale", locale, "err", err)
		// prepareDataDir verified the directory was empty, so whatever is
		// in it now is initdb's partial work.
		if err := clearDir(s.dataDir); err != nil {
			errs = append(errs, err)
			break
		}
	}
	return fmt.Errorf("localpg: initdb failed: %w", errors.Join(errs...))
}

// writeConfig replaces the managed block at the end of postgresql.conf.
// PostgreSQL uses the last occurrence of a setting, so the block wins over
// initdb's defaults and over anything a user wrote above it.
func (s *Server) writeConfig(port int, durable bool) error {
	path := filepath.Join(s.dataDir, "postgresql.conf")
	old, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("localpg: read postgresql.conf: %w", err)
	}
	socketDir := s.dataDir
	if len(socketDir)+len("/.s.PGSQL.65535") > maxSocketPath {
		// Too long for a Unix socket path; we only use TCP anyway.
		s.logger.Warn("localpg: data dir path too long for a Unix socket, disabling Unix sockets", "data_dir", s.dataDir)
		socketDir = ""
	}
	var b strings.Builder
	b.WriteString(stripManagedBlock(string(old)))
	fmt.Fprintf(&b, "%s\n", confBegin)
	fmt.Fprintf(&b, "listen_addresses = '127.0.0.1'\n")
	fmt.Fprintf(&b, "port = %d\n", port)
	fmt.Fprintf(&b, "unix_socket_directories = %s\n", quoteConf(socketDir))
	fmt.Fprintf(&b, "max_connections = 400\n")
	fmt.Fprintf(&b, "shared_buffers = 256MB\n")
	if !durable {
		fmt.Fprintf(&b, "fsync = off\n")
		fmt.Fprintf(&b, "synchronous_commit = off\n")
		fmt.Fprintf(&b, "full_page_writes = off\n")
	}
	for _, l := range s.extra {
		fmt.Fprintf(&b, "%s\n", l)
	}
	fmt.Fprintf(&b, "%s\n", confEnd)
	// WriteFile truncates the existing file, keeping its owner and mode.
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("localpg: write postgresql.conf: %w", err)
	}
	return nil
}

func stripManagedBlock(conf string) string {
	start := strings.Index(conf, confBegin)
	if start < 0 {
		if conf != "" && !strings.HasSuffix(conf, "\n") {
			conf += "\n"
		}
		return conf
	}
	rest := conf[start:]
	end := strings.Index(rest, confEnd)
	if end < 0 {
		return conf[:start] // truncated block: drop the remainder
	}
	after := rest[end+len(confEnd):]
	after = strings.TrimPrefix(after, "\n")
	return stripManagedBlock(conf[:start] + after)
}

func quoteConf(v string) string {
	return "'" + strings.ReplaceAll(v, "'", "''") + "'"
}

func (s *Server) pgCtlStart(ctx context.Context) error {
	logPath := filepath.Join(s.dataDir, "server.log")
	var logOffset int64
	if fi, err := os.Stat(logPath); err == nil {
		logOffset = fi.Size()
	}
	out, err := s.run(ctx, s.bin("pg_ctl"), "start", "-D", s.dataDir, "-w",
		"-t", strconv.Itoa(int(pgCtlTimeout/time.Second)), "-l", logPath)
	if err == nil {
		return nil
	}
	tail := tailFile(logPath, logOffset, logTailLines)
	// Do not leave a half-started postmaster behind (e.g. ctx cancelled or
	// the -t timeout expired while it was still starting up).
	if fileExists(filepath.Join(s.dataDir, "postmaster.pid")) {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, _ = s.run(stopCtx, s.bin("pg_ctl"), "stop", "-D", s.dataDir, "-m", "immediate", "-w")
		cancel()
	}
	err = fmt.Errorf("localpg: pg_ctl start: %w%s", err, formatOutput(out))
	if tail != "" {
		err = fmt.Errorf("%w\nlast lines of %s:\n%s", err, logPath, tail)
	}
	if strings.Contains(tail, "Address already in use") || strings.Contains(tail, "could not bind") {
		err = fmt.Errorf("%w: %w", errPortInUse, err)
	}
	return err
}

// runningServer reports whether postmaster.pid in dataDir names a live
// postmaster and, if so, its port. A postmaster that is still starting is
// waited for (bounded by ctx and pgCtlTimeout).
func runningServer(ctx context.Context, dataDir string) (port int, running bool, err error) {
	pidPath := filepath.Join(dataDir, "postmaster.pid")
	deadline := time.Now().Add(pgCtlTimeout)
	for {
		data, err := os.ReadFile(pidPath)
		if errors.Is(err, fs.ErrNotExist) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, fmt.Errorf("localpg: read %s: %w", pidPath, err)
		}
		// postmaster.pid: pid, data dir, start time, port, socket dir,
		// listen address, shmem key, status.
		lines := strings.Split(string(data), "\n")
		pid, perr := strconv.Atoi(strings.TrimSpace(lines[0]))
		if perr != nil || pid == 0 {
			// Being written right now, or garbage; retry briefly.
			if time.Now().After(deadline) {
				return 0, false, fmt.Errorf("localpg: unreadable %s", pidPath)
			}
		} else {
			if pid < 0 { // single-user backend
				pid = -pid
			}
			if !processAlive(pid) {
				return 0, false, nil // stale lock file; postgres handles it on start
			}
			if len(lines) > 3 {
				port, _ = strconv.Atoi(strings.TrimSpace(lines[3]))
			}
			if port == 0 {
				port = configuredPort(dataDir)
			}
			status := "starting"
			if len(lines) > 7 && strings.TrimSpace(lines[7]) != "" {
				status = strings.TrimSpace(lines[7])
			}
			switch {
			case status == "ready" || status == "standby":
				if port == 0 {
					return 0, false, fmt.Errorf("localpg: server pid %d is running on %s but its port is unknown", pid, dataDir)
				}
				return port, true, nil
			case status == "stopping" || time.Now().After(deadline):
				return 0, false, fmt.Errorf("localpg: server pid %d on %s is in state %q; wait for it or stop it with pg_ctl stop -D %s",
					pid, dataDir, status, dataDir)
			}
		}
		select {
		case <-ctx.Done():
			return 0, false, fmt.Errorf("localpg: wait for running server: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// findBinDir locates the directory holding initdb, pg_ctl and postgres.
func findBinDir(ctx context.Context) (string, error) {
	ok := func(dir string) bool {
		return isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "pg_ctl"))
	}
	if pgConfig, err := exec.LookPath("pg_config"); err == nil {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		out, err := exec.CommandContext(cctx, pgConfig, "--bindir").Output()
		cancel()
		if dir := strings.TrimSpace(string(out)); err == nil && ok(dir) {
			return dir, nil
		}
	}
	if initdb, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(initdb); err == nil && ok(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
		if ok(filepath.Dir(initdb)) {
			return filepath.Dir(initdb), nil
		}
	}
	matches, _ := filepath.Glob(debianBinGlob)
	best, bestVer := "", -1.0
	for _, dir := range matches {
		ver, err := strconv.ParseFloat(filepath.Base(filepath.Dir(dir)), 64)
		if err != nil || !ok(dir) {
			continue
		}
		if ver > bestVer {
			best, bestVer = dir, ver
		}
	}
	if best != "" {
		return best, nil
	}
	return "", errors.New("localpg: no PostgreSQL server binaries found (tried `pg_config --bindir`, initdb on PATH and " + debianBinGlob + "); " +
		"install them, e.g. `apt-get install postgresql` on Debian/Ubuntu")
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func clearDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("localpg: clear %s: %w", dir, err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("localpg: clear %s: %w", dir, err)
		}
	}
	return nil
}

// tailFile returns the last n lines of path from offset on.
func tailFile(path string, offset int64, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	data, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

func formatOutput(out []byte) string {
	out = bytes.TrimSpace(out)
	if len(out) == 0 {
		return ""
	}
	const max = 4000
	if len(out) > max {
		out = append([]byte("..."), out[len(out)-max:]...)
	}
	return "\n" + string(out)
}
