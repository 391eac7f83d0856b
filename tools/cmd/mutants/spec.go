package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"
)

// mutation is one deliberate bug: the edits that make it, and the tests
// expected to notice.
type mutation struct {
	ID        string
	Guarantee string // a heading of the README's "Guarantees and limits"
	Breaks    string // what the mutant no longer does, in a few words
	Edits     []edit
	Tests     []selection
	Timeout   time.Duration // go test -timeout; 0: the tool's default
	Line      int           // where its block starts in the list
}

// edit replaces the one occurrence of Old in File (relative to the
// repository's root) with New.
type edit struct {
	File     string
	Old, New string
}

// selection is one go test run: the tests of package Pkg whose names
// match Run (a -run pattern naming top-level tests).
type selection struct {
	Pkg string // as go test takes it, relative to the root: ".", "./internal/lease"
	Run string
}

var (
	idPattern  = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	keyPattern = regexp.MustCompile(`^([a-z]+):(.*)$`)
)

// parseMutations reads the list (format: docs/mutants.md and the head of
// tools/mutants/mutations.txt).
func parseMutations(r io.Reader) ([]mutation, error) {
	var (
		out   []mutation
		cur   *mutation
		block *string  // the old or new text whose "| " lines follow
		lines []string // those lines so far
		errs  []error
	)
	endBlock := func() {
		if block != nil {
			*block = strings.Join(lines, "\n")
			block, lines = nil, nil
		}
	}
	fail := func(n int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("line %d: %s", n, fmt.Sprintf(format, args...)))
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if block != nil && (line == "|" || strings.HasPrefix(line, "| ")) {
			lines = append(lines, strings.TrimPrefix(strings.TrimPrefix(line, "|"), " "))
			continue
		}
		endBlock()
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "" || strings.HasPrefix(trimmed, "#"):
			continue
		case strings.HasPrefix(trimmed, "[") && strings.HasSuffix(trimmed, "]"):
			id := strings.TrimSpace(trimmed[1 : len(trimmed)-1])
			if !idPattern.MatchString(id) {
				fail(n, "mutation id %q: use lower-case letters, digits and dashes", id)
			}
			out = append(out, mutation{ID: id, Line: n})
			cur = &out[len(out)-1]
			continue
		}
		m := keyPattern.FindStringSubmatch(line)
		if m == nil {
			fail(n, "expected [id], key: value, or | text; got %q", line)
			continue
		}
		if cur == nil {
			fail(n, "%s: before the first [id]", m[1])
			continue
		}
		key, val := m[1], strings.TrimSpace(m[2])
		switch key {
		case "guarantee":
			cur.Guarantee = val
		case "breaks":
			cur.Breaks = val
		case "file":
			cur.Edits = append(cur.Edits, edit{File: val})
		case "old", "new":
			if len(cur.Edits) == 0 {
				fail(n, "%s: before a file:", key)
				continue
			}
			e := &cur.Edits[len(cur.Edits)-1]
			dst := &e.Old
			if key == "new" {
				dst = &e.New
			}
			*dst = val
			if val == "" {
				block = dst // the text follows on "| " lines, or is empty
			}
		case "test":
			pkg, run, ok := strings.Cut(val, " ")
			run = strings.TrimSpace(run)
			if !ok || run == "" {
				fail(n, "test: want \"<package> <-run pattern>\", got %q", val)
				continue
			}
			cur.Tests = append(cur.Tests, selection{Pkg: pkg, Run: run})
		case "timeout":
			d, err := time.ParseDuration(val)
			if err != nil || d <= 0 {
				fail(n, "timeout: %q is not a positive duration", val)
				continue
			}
			cur.Timeout = d
		default:
			fail(n, "unknown key %q", key)
		}
	}
	endBlock()
	if err := sc.Err(); err != nil {
		return nil, err
	}
	seen := map[string]int{}
	for _, m := range out {
		if prev, ok := seen[m.ID]; ok {
			fail(m.Line, "mutation %s: already defined on line %d", m.ID, prev)
		}
		seen[m.ID] = m.Line
		if err := m.check(); err != nil {
			fail(m.Line, "mutation %s: %v", m.ID, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// check reports what the mutation lacks.
func (m mutation) check() error {
	var errs []error
	if m.Guarantee == "" {
		errs = append(errs, errors.New("no guarantee:"))
	}
	if m.Breaks == "" {
		errs = append(errs, errors.New("no breaks:"))
	}
	if len(m.Edits) == 0 {
		errs = append(errs, errors.New("no file:"))
	}
	for _, e := range m.Edits {
		switch {
		case e.File == "" || strings.HasPrefix(e.File, "/") || strings.Contains(e.File, ".."):
			errs = append(errs, fmt.Errorf("file %q: want a path inside the repository", e.File))
		case e.Old == "":
			errs = append(errs, fmt.Errorf("%s: no old: text", e.File))
		case e.Old == e.New:
			errs = append(errs, fmt.Errorf("%s: new: is the old text", e.File))
		}
	}
	if len(m.Tests) == 0 {
		errs = append(errs, errors.New("no test:"))
	}
	for _, s := range m.Tests {
		if !strings.HasPrefix(s.Pkg, ".") {
			errs = append(errs, fmt.Errorf("test package %q: want a path from the root, such as . or ./internal/lease", s.Pkg))
		}
		if strings.Contains(s.Run, "/") {
			errs = append(errs, fmt.Errorf("test pattern %q: name top-level tests only (no /)", s.Run))
		} else if _, err := regexp.Compile(s.Run); err != nil {
			errs = append(errs, fmt.Errorf("test pattern %q: %w", s.Run, err))
		}
	}
	return errors.Join(errs...)
}

// readMutations parses the list in file.
func readMutations(file string) ([]mutation, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	ms, err := parseMutations(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return ms, nil
}

// guaranteeItem matches an item of the README's guarantees: "- **Durable:**",
// "- **Bad input** gets ...".
var guaranteeItem = regexp.MustCompile(`^- \*\*([^*]+?):?\*\*`)

// readmeGuarantees returns the headings of the items under the README's
// "## Guarantees and limits", in order.
func readmeGuarantees(readme []byte) ([]string, error) {
	var out []string
	in := false
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "## ") {
			if in {
				break
			}
			in = strings.TrimSpace(line) == "## Guarantees and limits"
			continue
		}
		if m := guaranteeItem.FindStringSubmatch(line); in && m != nil {
			out = append(out, m[1])
		}
	}
	if len(out) == 0 {
		return nil, errors.New(`README.md: no "- **...**" items under "## Guarantees and limits"`)
	}
	return out, nil
}

// checkCoverage: every mutation names a guarantee of the README, and every
// guarantee has a mutation.
func checkCoverage(ms []mutation, guarantees []string) error {
	known := map[string]bool{}
	for _, g := range guarantees {
		known[g] = true
	}
	covered := map[string]bool{}
	var errs []error
	for _, m := range ms {
		if !known[m.Guarantee] {
			errs = append(errs, fmt.Errorf("mutation %s: guarantee %q is not a heading of the README's guarantees (%s)",
				m.ID, m.Guarantee, strings.Join(guarantees, ", ")))
		}
		covered[m.Guarantee] = true
	}
	for _, g := range guarantees {
		if !covered[g] {
			errs = append(errs, fmt.Errorf("the README's guarantee %q has no mutation", g))
		}
	}
	return errors.Join(errs...)
}
