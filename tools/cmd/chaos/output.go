package main

import (
	"bufio"
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// writeDeliveries writes every delivery as CSV, in start order, for digging
// into a failed run with a spreadsheet or sqlite.
func writeDeliveries(path string, ds []Delivery) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing deliveries: %w", err)
	}
	defer f.Close()
	ds = slices.Clone(ds)
	slices.SortStableFunc(ds, func(a, b Delivery) int { return a.Start.Compare(b.Start) })
	w := csv.NewWriter(f)
	_ = w.Write([]string{"start", "end", "node", "ordering_id", "scheduled_at", "uniqueness_key", "attempt", "status", "aborted"})
	for _, d := range ds {
		_ = w.Write([]string{
			d.Start.Format(time.RFC3339Nano), d.End.Format(time.RFC3339Nano), d.Node, d.OrderingID,
			d.ScheduledAt.UTC().Format(time.RFC3339Nano), d.UniquenessKey,
			strconv.Itoa(d.Attempt), strconv.Itoa(d.Status), strconv.FormatBool(d.Aborted),
		})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return fmt.Errorf("writing deliveries: %w", err)
	}
	return f.Close()
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Base(path), err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Base(path), err)
	}
	return nil
}

var (
	levelRe = regexp.MustCompile(`\blevel=(WARN|ERROR)\b`)
	msgRe   = regexp.MustCompile(`\bmsg=("(?:[^"\\]|\\.)*"|\S+)`)
)

// summarizeLogs prints, per node log, the count of warnings and errors and
// the most frequent of their messages over all logs: the quickest look at
// what the workers went through.
func summarizeLogs(w io.Writer, paths []string) {
	fmt.Fprintln(w, "-- worker logs (warnings, errors, other lines)")
	msgs := map[string]int{}
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintf(w, "  %s: %v\n", path, err)
			continue
		}
		var warn, errs, other int
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			m := levelRe.FindStringSubmatch(line)
			switch {
			case m == nil:
				if !strings.Contains(line, "level=INFO") && !strings.Contains(line, "level=DEBUG") && !strings.HasPrefix(line, "=== chaos:") &&
					!strings.HasPrefix(line, "pgsched: ") {
					other++ // panics, stack traces, anything not from slog
					msgs["(not a log line) "+truncate(line, 80)]++
				}
				continue
			case m[1] == "WARN":
				warn++
			default:
				errs++
			}
			msg := "?"
			if mm := msgRe.FindStringSubmatch(line); mm != nil {
				msg = strings.Trim(mm[1], `"`)
			}
			msgs[m[1]+" "+msg]++
		}
		f.Close()
		fmt.Fprintf(w, "  %s: %d, %d, %d\n", path, warn, errs, other)
	}
	keys := slices.SortedFunc(maps.Keys(msgs), func(a, b string) int {
		return cmp.Or(cmp.Compare(msgs[b], msgs[a]), strings.Compare(a, b))
	})
	for _, k := range keys[:min(len(keys), 12)] {
		fmt.Fprintf(w, "  %6d  %s\n", msgs[k], k)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
