package localpg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"time"
)

// StartStandby makes a streaming standby of primary in opts.DataDir, which
// must be missing or empty (pg_basebackup -R: a copy of the primary that
// follows its WAL), and starts it on opts.Port (0: a free port). Its
// settings are its own (opts.Durable, opts.Settings), not the primary's.
// With "synchronous_standby_names = '*'" among the primary's Settings,
// the primary's commits wait until the standby has them.
//
// A standby is read-only until Promote; then it is a primary on a new
// timeline. It is the primary's own kind of Server: Stop, Halt and
// Resume work on it.
func StartStandby(ctx context.Context, primary *Server, opts Options) (*Server, error) {
	if primary == nil {
		return nil, errors.New("localpg: StartStandby needs a primary")
	}
	if opts.DataDir == "" {
		return nil, errors.New("localpg: Options.DataDir is required")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("localpg: resolve data dir: %w", err)
	}
	s := &Server{dataDir: dataDir, binDir: primary.binDir, runAs: primary.runAs, logger: logger, extra: opts.Settings}
	if err := s.prepareDataDir(); err != nil {
		return nil, err
	}
	if fileExists(filepath.Join(dataDir, "PG_VERSION")) {
		return nil, fmt.Errorf("localpg: %s already holds a cluster; a standby starts from an empty directory", dataDir)
	}
	out, err := s.run(ctx, s.bin("pg_basebackup"), "-h", "127.0.0.1", "-p", strconv.Itoa(primary.port), "-U", "postgres",
		"-D", dataDir, "-R", "-X", "stream", "--checkpoint=fast")
	if err != nil {
		return nil, fmt.Errorf("localpg: pg_basebackup from port %d: %w%s", primary.port, err, formatOutput(out))
	}
	port := opts.Port
	if port == 0 {
		if port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	if err := s.writeConfig(port, opts.Durable); err != nil {
		return nil, err
	}
	if err := s.pgCtlStart(ctx); err != nil {
		return nil, err
	}
	s.port, s.owned = port, true
	logger.Info("localpg: standby started", "data_dir", dataDir, "port", port, "primary_port", primary.port)
	return s, nil
}

// Promote makes a standby a primary (pg_ctl promote), on a new timeline,
// and waits until it accepts writes.
func (s *Server) Promote(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.controllable(Fast); err != nil {
		return err
	}
	out, err := s.run(ctx, s.bin("pg_ctl"), "promote", "-D", s.dataDir, "-w",
		"-t", strconv.Itoa(int(pgCtlTimeout/time.Second)))
	if err != nil {
		return fmt.Errorf("localpg: pg_ctl promote: %w%s", err, formatOutput(out))
	}
	s.logger.Info("localpg: standby promoted", "data_dir", s.dataDir, "port", s.port)
	return nil
}
