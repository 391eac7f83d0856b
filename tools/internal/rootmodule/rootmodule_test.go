package rootmodule

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDir: from inside the tools module, whose own go.mod names a longer
// path, Dir passes it by and finds the library's module with cmd/worker.
func TestDir(t *testing.T) {
	t.Parallel()
	dir, err := Dir()
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(dir, "cmd", "worker", "main.go"))
	wd, err := os.Getwd()
	require.NoError(t, err)
	rel, err := filepath.Rel(dir, wd)
	require.NoError(t, err)
	require.Equal(t, filepath.Join("tools", "internal", "rootmodule"), rel)
}
