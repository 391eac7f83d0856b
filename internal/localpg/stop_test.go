package localpg

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStopDataDir: a server left running (its Server value gone, as when
// the worker that started it was killed) is stopped by its data directory,
// also when this process is root; stopping it again finds nothing.
func TestStopDataDir(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := filepath.Join(tempDir(t), "data")
	srv, err := Start(ctx, Options{DataDir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })

	stopped, err := StopDataDir(ctx, dir)
	require.NoError(t, err)
	require.True(t, stopped)
	_, running, err := runningServer(ctx, dir)
	require.NoError(t, err)
	require.False(t, running)

	stopped, err = StopDataDir(ctx, dir)
	require.NoError(t, err)
	require.False(t, stopped)
}
