package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/tools/internal/rootmodule"
)

func TestParseMutations(t *testing.T) {
	t.Parallel()
	ms, err := parseMutations(strings.NewReader(`# a comment
[one]
guarantee: Fenced
breaks: no fence
file: a.go
old: if !live {
new: if false {
test: . ^TestA$
test: ./internal/x ^(TestB|TestC)$
timeout: 2m

[two-edits]
guarantee: Durable
breaks: two files
file: a.sql
old:
|     WHERE x
|
| 	AND y
new:
file: b.go
old: keep
new: changed
test: . ^TestD$
`))
	require.NoError(t, err)
	require.Len(t, ms, 2)
	require.Equal(t, mutation{ID: "one", Guarantee: "Fenced", Breaks: "no fence",
		Edits:   []edit{{File: "a.go", Old: "if !live {", New: "if false {"}},
		Tests:   []selection{{Pkg: ".", Run: "^TestA$"}, {Pkg: "./internal/x", Run: "^(TestB|TestC)$"}},
		Timeout: 2 * time.Minute, Line: 2}, ms[0])
	require.Equal(t, []edit{{File: "a.sql", Old: "    WHERE x\n\n\tAND y", New: ""}, {File: "b.go", Old: "keep", New: "changed"}},
		ms[1].Edits, "block text keeps its indentation; an empty new: deletes")
}

func TestParseMutationsErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, text, want string }{
		{"no tests", "[a]\nguarantee: G\nbreaks: b\nfile: f\nold: x\nnew: y\n", "no test:"},
		{"no old", "[a]\nguarantee: G\nbreaks: b\nfile: f\nnew: y\ntest: . T\n", "no old: text"},
		{"same text", "[a]\nguarantee: G\nbreaks: b\nfile: f\nold: y\nnew: y\ntest: . T\n", "new: is the old text"},
		{"duplicate", "[a]\nguarantee: G\nbreaks: b\nfile: f\nold: x\nnew: y\ntest: . T\n[a]\nguarantee: G\nbreaks: b\nfile: f\nold: x\nnew: y\ntest: . T\n", "already defined"},
		{"subtest pattern", "[a]\nguarantee: G\nbreaks: b\nfile: f\nold: x\nnew: y\ntest: . TestA/sub\n", "top-level tests only"},
		{"path outside", "[a]\nguarantee: G\nbreaks: b\nfile: ../f\nold: x\nnew: y\ntest: . T\n", "inside the repository"},
		{"unknown key", "[a]\nguarantee: G\ncolour: red\n", `unknown key "colour"`},
		{"bad id", "[A b]\n", "lower-case"},
		{"stray text", "[a]\nsomething\n", "expected [id]"},
	} {
		_, err := parseMutations(strings.NewReader(tc.text))
		require.ErrorContains(t, err, tc.want, tc.name)
	}
}

func TestReadmeGuaranteesAndCoverage(t *testing.T) {
	t.Parallel()
	readme := []byte("# x\n## Guarantees and limits\n\n- **Durable:** a\n  b\n- **Bad input** gets\n## Documentation\n- **Not:** c\n")
	gs, err := readmeGuarantees(readme)
	require.NoError(t, err)
	require.Equal(t, []string{"Durable", "Bad input"}, gs)
	require.NoError(t, checkCoverage([]mutation{{ID: "a", Guarantee: "Durable"}, {ID: "b", Guarantee: "Bad input"}}, gs))
	err = checkCoverage([]mutation{{ID: "a", Guarantee: "Durable"}, {ID: "b", Guarantee: "Speed"}}, gs)
	require.ErrorContains(t, err, `guarantee "Speed" is not a heading`)
	require.ErrorContains(t, err, `"Bad input" has no mutation`)
}

func TestApplyAndRestore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f.sql"), []byte("a AND b\nc AND b\n"), 0o644))
	m := mutation{Edits: []edit{{File: "f.sql", Old: "a AND b", New: "a"}, {File: "f.sql", Old: "c AND b", New: "c"}}}
	restore, err := apply(dir, m)
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(dir, "f.sql"))
	require.NoError(t, err)
	require.Equal(t, "a\nc\n", string(got))
	require.NoError(t, restore())
	got, err = os.ReadFile(filepath.Join(dir, "f.sql"))
	require.NoError(t, err)
	require.Equal(t, "a AND b\nc AND b\n", string(got))

	_, err = apply(dir, mutation{Edits: []edit{{File: "f.sql", Old: "AND b", New: ""}}})
	require.ErrorIs(t, err, errNotApplied, "twice in the file")
	_, err = apply(dir, mutation{Edits: []edit{{File: "f.sql", Old: "a AND b", New: "x"}, {File: "f.sql", Old: "nowhere", New: ""}}})
	require.ErrorIs(t, err, errNotApplied)
	got, err = os.ReadFile(filepath.Join(dir, "f.sql"))
	require.NoError(t, err)
	require.Equal(t, "a AND b\nc AND b\n", string(got), "a failed apply changes nothing")
}

func TestParseTestOutput(t *testing.T) {
	t.Parallel()
	r := parseTestOutput([]byte(`=== RUN   TestA
=== RUN   TestA/sub
    --- FAIL: TestA/sub (0.00s)
--- FAIL: TestA (0.01s)
=== RUN   TestB
--- PASS: TestB (0.00s)
FAIL
`))
	require.Equal(t, []string{"TestA"}, r.Failed)
	require.Equal(t, []string{"TestA", "TestB"}, r.Ran)
	require.False(t, r.BuildFailed)

	r = parseTestOutput([]byte("# github.com/x/y\n./a.go:1:1: declared and not used: x\nFAIL\tgithub.com/x/y [build failed]\n"))
	require.True(t, r.BuildFailed)

	r = parseTestOutput([]byte("=== RUN   TestSlow\npanic: test timed out after 5m0s\n\trunning tests:\n\t\tTestSlow (5m0s)\n\ngoroutine 1\n"))
	require.Equal(t, []string{"TestSlow"}, r.TimedOut)
}

// TestMutationListApplies: every mutation of the project's list names a
// guarantee of the README, every guarantee has one, and every old text is
// in its file exactly once. A change to the code that moves a mutated
// line fails here, in the ordinary tests, rather than at the next
// `make mutants`.
func TestMutationListApplies(t *testing.T) {
	t.Parallel()
	root, err := rootmodule.Dir()
	require.NoError(t, err)
	ms, err := readMutations(filepath.Join(root, "tools", "mutants", "mutations.txt"))
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	gs, err := readmeGuarantees(readme)
	require.NoError(t, err)
	require.NoError(t, checkCoverage(ms, gs))
	for _, m := range ms {
		require.NoError(t, checkApplies(root, m), "mutation %s", m.ID)
		for _, s := range m.Tests {
			require.DirExists(t, filepath.Join(root, filepath.FromSlash(s.Pkg)), "mutation %s", m.ID)
		}
	}
}
