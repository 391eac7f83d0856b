package main

import (
	"flag"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/metrics"
)

// doc reads a page of the user documentation, by its path from the
// repository's root.
func doc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile("../../" + path)
	require.NoError(t, err)
	return string(b)
}

// TestReadmeConfigTable: the configuration table in docs/configuration.md
// and the worker's flags agree both ways: every flag (bar -version and
// -stop-local, which are commands, not settings) has a row naming its flag
// and its variable, and every row names a flag that reads that variable.
func TestReadmeConfigTable(t *testing.T) {
	t.Parallel()
	row := regexp.MustCompile("(?m)^\\| `([A-Z_]+)` \\| `-([a-z-]+)` \\|")
	documented := map[string]string{} // flag -> variable
	for _, m := range row.FindAllStringSubmatch(doc(t, "docs/configuration.md"), -1) {
		documented[m[2]] = m[1]
	}
	require.NotEmpty(t, documented, "docs/configuration.md has a configuration table")

	_, fs, _ := flags(func(string) string { return "" })
	env := regexp.MustCompile(`\(([A-Z_]+)\)$`)
	served := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "version" || f.Name == "stop-local" {
			return
		}
		m := env.FindStringSubmatch(f.Usage)
		require.NotNil(t, m, "-%s names its environment variable", f.Name)
		served[f.Name] = m[1]
	})
	require.Equal(t, served, documented, "docs/configuration.md's table lists exactly the worker's flags, each with its variable")
}

// TestReadmeMetrics: the metric table in docs/metrics.md lists exactly the
// metrics a worker and a client register.
func TestReadmeMetrics(t *testing.T) {
	t.Parallel()
	row := regexp.MustCompile("(?m)^\\| `(pgsched_[a-z_]+)` \\|")
	var documented []string
	for _, m := range row.FindAllStringSubmatch(doc(t, "docs/metrics.md"), -1) {
		documented = append(documented, m[1])
	}

	reg := prometheus.NewRegistry()
	_, err := metrics.New(reg)
	require.NoError(t, err)
	_, err = metrics.Scheduled(reg)
	require.NoError(t, err)
	// Describe, not Gather: a vector without series yet is registered but
	// not gathered.
	descs := make(chan *prometheus.Desc, 100)
	go func() {
		reg.Describe(descs)
		close(descs)
	}()
	name := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	var registered []string
	for d := range descs {
		m := name.FindStringSubmatch(d.String())
		require.NotNil(t, m, d.String())
		registered = append(registered, m[1])
	}
	slices.Sort(documented)
	slices.Sort(registered)
	require.Equal(t, registered, documented, "docs/metrics.md's metric table: %s", strings.Join(registered, ", "))
}
