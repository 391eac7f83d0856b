package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// outcome is a result's last column: what caught it, or why it is not
// caught.
func (r result) outcome() string {
	switch {
	case r.Status == statusCaught:
		return "CAUGHT by " + strings.Join(r.CaughtBy, ", ")
	case r.Status == "":
		return "not run"
	default:
		return string(r.Status) + ": " + r.Detail + " (log: " + r.Log + ")"
	}
}

// printTable writes the results as an aligned table, in list order.
func printTable(w io.Writer, results []result) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "GUARANTEE\tMUTATION\tBREAKS\tRESULT")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.M.Guarantee, r.M.ID, r.M.Breaks, r.outcome())
	}
	_ = tw.Flush()
}

// markdownTable is the table for docs/mutants.md.
func markdownTable(results []result, start time.Time, elapsed time.Duration, o options) string {
	var b strings.Builder
	caught := 0
	for _, r := range results {
		if r.Status == statusCaught {
			caught++
		}
	}
	fmt.Fprintf(&b, "Run of %s: %d of %d mutations caught in %s (`-j %d`, race %t).\n\n",
		start.UTC().Format("2006-01-02"), caught, len(results), elapsed, o.jobs, o.race)
	b.WriteString("| Guarantee | Mutation | Breaks | Result |\n| --- | --- | --- | --- |\n")
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	for _, r := range results {
		out := string(r.Status)
		if r.Status == statusCaught {
			names := make([]string, len(r.CaughtBy))
			for i, n := range r.CaughtBy {
				names[i] = "`" + n + "`"
			}
			out = "caught by " + strings.Join(names, ", ")
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s |\n", cell(r.M.Guarantee), r.M.ID, cell(r.M.Breaks), cell(out))
	}
	return b.String()
}

// list prints the mutations, their tests, and whether each applies to the
// working tree as it is; it fails when one does not.
func list(w io.Writer, root string, ms []mutation) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "GUARANTEE\tMUTATION\tBREAKS\tFILES\tTESTS\tAPPLIES")
	var errs []error
	for _, m := range ms {
		var files, tests []string
		for _, e := range m.Edits {
			files = append(files, e.File)
		}
		for _, t := range m.Tests {
			tests = append(tests, t.Pkg+" "+t.Run)
		}
		applies := "yes"
		if err := checkApplies(root, m); err != nil {
			applies = "NO: " + err.Error()
			errs = append(errs, fmt.Errorf("mutation %s: %w", m.ID, err))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.Guarantee, m.ID, m.Breaks,
			strings.Join(files, ", "), strings.Join(tests, "; "), applies)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return errors.Join(errs...)
}
