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

// StopDataDir stops the server running in dataDir, whoever started it, as
// the OS user it runs as (pg_ctl refuses root): the way to stop a local
// PostgreSQL that a worker left running (killed, or started by an earlier
// run). It reports whether a server was running.
func StopDataDir(ctx context.Context, dataDir string) (bool, error) {
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return false, fmt.Errorf("localpg: resolve data dir: %w", err)
	}
	_, running, err := runningServer(ctx, dir)
	if err != nil {
		return false, err
	}
	if !running {
		return false, nil
	}
	binDir, err := findBinDir(ctx)
	if err != nil {
		return false, err
	}
	runAs, err := serverUser()
	if err != nil {
		return false, err
	}
	s := &Server{dataDir: dir, binDir: binDir, runAs: runAs, logger: slog.New(slog.DiscardHandler)}
	out, err := s.run(ctx, s.bin("pg_ctl"), "stop", "-D", dir, "-m", "fast", "-w",
		"-t", strconv.Itoa(int(pgCtlTimeout/time.Second)))
	if err != nil {
		return true, fmt.Errorf("localpg: pg_ctl stop: %w%s", err, formatOutput(out))
	}
	if _, still, err := runningServer(ctx, dir); err == nil && still {
		return true, errors.New("localpg: the server still runs after pg_ctl stop")
	}
	return true, nil
}
