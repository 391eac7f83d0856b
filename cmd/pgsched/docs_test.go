package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDocsListEveryCommand: docs/cli.md has a row for every command and
// names every flag each one takes, and every exit status.
func TestDocsListEveryCommand(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	require.NoError(t, err)
	doc := string(raw)
	for _, cmd := range commands {
		require.True(t, strings.Contains(doc, "\n| `"+cmd.path), "docs/cli.md's table has a row for %s", cmd.path)
		c := &cli{}
		fs := c.flagSet("pgsched " + cmd.path)
		cmd.setup(c, fs)
		fs.VisitAll(func(f *flag.Flag) {
			named := false
			for _, before := range []string{"`", " ", "["} {
				named = named || strings.Contains(doc, before+"-"+f.Name+" ") || strings.Contains(doc, before+"-"+f.Name+"`")
			}
			require.True(t, named,
				"docs/cli.md names %s's flag -%s", cmd.path, f.Name)
		})
	}
	for _, code := range []string{"| 0 |", "| 1 |", "| 2 |", "| 3 |"} {
		require.True(t, strings.Contains(doc, "\n"+code), "docs/cli.md explains exit status %s", code)
	}
}
