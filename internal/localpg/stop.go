package localpg

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
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
	port, running, err := runningServer(ctx, dir)
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
	// The server it found, as if Start had started it, so Stop stops it.
	s := &Server{dataDir: dir, binDir: binDir, port: port, owned: true, runAs: runAs, logger: slog.New(slog.DiscardHandler)}
	return true, s.Stop(ctx)
}
