package pgsched_test

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/pgtest"
)

// TestReadmeQuickStart runs README's Go quick start as a user would: the
// program pasted into a fresh module outside this repository (go get
// resolved to this checkout by a replace), built, and run against an empty
// database of its own: it migrates, enqueues, runs its typed handler and
// stops.
func TestReadmeQuickStart(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(readme), "<!-- quickstart:begin -->\n```go\n")
	require.True(t, ok, "README has the quick start markers")
	program, _, ok := strings.Cut(rest, "```\n<!-- quickstart:end -->")
	require.True(t, ok, "README's quick start block ends before its end marker")

	repo, err := filepath.Abs(".")
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(program), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	goCmd := func(args ...string) {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
	}
	goCmd("mod", "init", "example.com/quickstart")
	goCmd("mod", "edit", "-require=github.com/pgsched/pgsched@v0.0.0", "-replace=github.com/pgsched/pgsched="+repo)
	goCmd("mod", "tidy")
	goCmd("build", "-o", "quickstart", ".")

	// An empty database: the quick start uses the default schema.
	admin := pgtest.AdminPool(t)
	db := pgtest.UniqueName(t, "qs")
	_, err = admin.Exec(ctx, "CREATE DATABASE "+db)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := admin.Exec(context.Background(), "DROP DATABASE "+db+" WITH (FORCE)")
		require.NoError(t, err)
	})
	u, err := url.Parse(pgtest.ServerURL(t))
	require.NoError(t, err)
	u.Path = "/" + db

	cmd := exec.CommandContext(ctx, filepath.Join(dir, "quickstart"))
	cmd.Env = append(os.Environ(), "DATABASE_URL="+u.String())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "scheduled: inserted\n")
	require.Contains(t, string(out), "sending a receipt to a@example.com for order-42\n")
}
