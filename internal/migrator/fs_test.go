package migrator

import (
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

// TestRewrittenFS: the in-memory file system goose reads is a valid
// fs.FS, lists every embedded migration, and holds them rewritten for
// the schema.
func TestRewrittenFS(t *testing.T) {
	t.Parallel()
	fsys, err := rewrittenFS("other_schema")
	require.NoError(t, err)
	names, err := fs.Glob(fsys, "*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, names)
	require.NoError(t, fstest.TestFS(fsys, names...))
	b, err := fs.ReadFile(fsys, names[0])
	require.NoError(t, err)
	require.Contains(t, string(b), "other_schema.")
	require.False(t, strings.Contains(string(b), "CREATE TABLE pgsched."), "no table left in the default schema")
}
