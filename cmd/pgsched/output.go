package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"
)

// table prints rows as aligned columns under a header in capitals.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, headers ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(headers...)
	return t
}

func (t *table) row(cells ...string) { fmt.Fprintln(t.tw, strings.Join(cells, "\t")) }

func (t *table) flush() error { return t.tw.Flush() }

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// text is a string value in a table cell: quoted when it is empty or holds
// what would break the columns (a tab, a line break, any control or
// space character but the plain space), so every cell is one word-like
// field a reader can copy.
func text(s string) string {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool {
		return r != ' ' && (unicode.IsControl(r) || unicode.IsSpace(r) || r == utf8.RuneError)
	}) {
		return strconv.Quote(s)
	}
	return s
}

// optional is a cell that may be absent ("-").
func optional(s string) string {
	if s == "" {
		return "-"
	}
	return text(s)
}

// short cuts a long message to n runes for a table; show and -json give it
// whole.
func short(s string, n int) string {
	if s == "" {
		return "-"
	}
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > n {
		s = string([]rune(s)[:n-1]) + "…"
	}
	return s
}

// timeText is a time in UTC to the microsecond, as the database keeps it
// (a task's key holds its scheduled_at exactly); "-" when zero.
func timeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// timeAt is timeText of a time that may be absent.
func timeAt(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return timeText(*t)
}

// ago is how long before now t was, rounded for a reader; "-" when t is
// zero.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return seconds(now.Sub(t).Seconds()) + " ago"
}

// seconds is a duration given in seconds, rounded for a reader.
func seconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// timePtr is t for JSON: null when zero, else in UTC.
func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// payload is a stored JSON payload for JSON output (null when absent).
func payload(p []byte) json.RawMessage {
	if len(p) == 0 {
		return json.RawMessage("null")
	}
	return json.RawMessage(p)
}
