package cronspec

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrInvalid is wrapped by every error that Parse and LoadZone return.
var ErrInvalid = errors.New("cronspec: invalid schedule")

// specError is a parse error: its message names what is wrong, and it
// matches ErrInvalid.
type specError struct{ msg string }

func (e *specError) Error() string { return e.msg }
func (e *specError) Unwrap() error { return ErrInvalid }

func errorf(format string, args ...any) error {
	return &specError{msg: "cronspec: " + fmt.Sprintf(format, args...)}
}

// Schedule is a parsed spec. The zero Schedule has no ticks. Schedules are
// comparable: two Schedules are == when they parse from the same normalized
// spec.
type Schedule struct {
	fields [numFields]field
	every  int64  // seconds between @every ticks; 0 for wall-clock schedules
	name   string // the canonical shorthand ("@daily") the schedule came from, or ""
}

// The cron fields, in the order of a six-field spec.
const (
	fSecond = iota
	fMinute
	fHour
	fDom
	fMonth
	fDow
	numFields
)

// field is one parsed cron field: bit v of bits is set when value v
// matches (day of week 7 is stored as 0).
type field struct {
	bits uint64
	// star is the step of a field written "*" (1) or "*/n" (n), and 0 for
	// any other field. It keeps the day-of-month/day-of-week rule and lets
	// String write the field back as it was meant.
	star uint8
}

type fieldSpec struct {
	name     string
	min, max int      // the values a spec may write
	last     int      // the last value "*", "*/n" and "a/n" reach
	names    []string // names[i] is the name of value min+i
}

var fieldSpecs = [numFields]fieldSpec{
	fSecond: {name: "second", min: 0, max: 59, last: 59},
	fMinute: {name: "minute", min: 0, max: 59, last: 59},
	fHour:   {name: "hour", min: 0, max: 23, last: 23},
	fDom:    {name: "day-of-month", min: 1, max: 31, last: 31},
	fMonth: {name: "month", min: 1, max: 12, last: 12,
		names: []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}},
	fDow: {name: "day-of-week", min: 0, max: 7, last: 6,
		names: []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}},
}

// shorthands maps every accepted shorthand to its canonical name and its
// five cron fields.
var shorthands = map[string]struct{ name, fields string }{
	"@yearly":   {"@yearly", "0 0 1 1 *"},
	"@annually": {"@yearly", "0 0 1 1 *"},
	"@monthly":  {"@monthly", "0 0 1 * *"},
	"@weekly":   {"@weekly", "0 0 * * 0"},
	"@daily":    {"@daily", "0 0 * * *"},
	"@midnight": {"@daily", "0 0 * * *"},
	"@hourly":   {"@hourly", "0 * * * *"},
}

// Parse parses a spec in one of the forms the package documentation lists.
// Every error it returns wraps ErrInvalid and names the field or shorthand
// that is wrong.
func Parse(spec string) (Schedule, error) {
	words := strings.Fields(spec)
	if len(words) == 0 {
		return Schedule{}, errorf("empty spec")
	}
	if strings.HasPrefix(words[0], "@") {
		return parseShorthand(words)
	}
	switch len(words) {
	case 5:
		words = append([]string{"0"}, words...)
	case 6:
	default:
		return Schedule{}, errorf("want 5 or 6 fields, got %d", len(words))
	}
	var s Schedule
	for k, text := range words {
		f, err := parseField(k, text)
		if err != nil {
			return Schedule{}, err
		}
		s.fields[k] = f
	}
	return s, nil
}

func parseShorthand(words []string) (Schedule, error) {
	name := strings.ToLower(words[0])
	if name == "@every" {
		switch len(words) {
		case 1:
			return Schedule{}, errorf(`@every needs a duration, like "@every 1h30m"`)
		case 2:
		default:
			return Schedule{}, errorf("@every %q: want one duration, without spaces", strings.Join(words[1:], " "))
		}
		arg := words[1]
		d, err := time.ParseDuration(arg)
		switch {
		case err != nil:
			return Schedule{}, errorf("@every %q: not a duration (want Go syntax like 90s, 15m or 1h30m)", arg)
		case d < time.Second:
			return Schedule{}, errorf("@every %q: the interval must be at least 1s", arg)
		case d%time.Second != 0:
			return Schedule{}, errorf("@every %q: the interval must be a whole number of seconds", arg)
		}
		return Schedule{every: int64(d / time.Second)}, nil
	}
	sh, ok := shorthands[name]
	if !ok {
		return Schedule{}, errorf("unknown shorthand %q (want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every <duration>)", words[0])
	}
	if len(words) > 1 {
		return Schedule{}, errorf("%s takes no arguments, got %q", name, strings.Join(words[1:], " "))
	}
	s, err := Parse(sh.fields)
	if err != nil {
		panic(err) // the table above is wrong
	}
	s.name = sh.name
	return s, nil
}

func parseField(k int, text string) (field, error) {
	fs := &fieldSpecs[k]
	fail := func(format string, args ...any) error {
		return errorf("%s field %q: %s", fs.name, text, fmt.Sprintf(format, args...))
	}
	if text == "*" || strings.HasPrefix(text, "*/") {
		if strings.Contains(text, ",") {
			return field{}, fail("* must stand alone, not in a list")
		}
		step := 1
		if text != "*" {
			var msg string
			if step, msg = fs.step(text[2:]); msg != "" {
				return field{}, fail("%s", msg)
			}
		}
		var f field
		for v := fs.min; v <= fs.last; v += step {
			f.bits |= 1 << v
		}
		f.star = uint8(step)
		return f, nil
	}
	var f field
	for _, item := range strings.Split(text, ",") {
		if item == "" {
			return field{}, fail("empty list item")
		}
		rng, stepText, hasStep := strings.Cut(item, "/")
		step := 1
		if hasStep {
			var msg string
			if step, msg = fs.step(stepText); msg != "" {
				return field{}, fail("%s", msg)
			}
		}
		if rng == "*" {
			return field{}, fail("* must stand alone, not in a list")
		}
		loText, hiText, isRange := strings.Cut(rng, "-")
		lo, msg := fs.value(loText, item)
		if msg != "" {
			return field{}, fail("%s", msg)
		}
		hi := lo
		switch {
		case isRange:
			if hi, msg = fs.value(hiText, item); msg != "" {
				return field{}, fail("%s", msg)
			}
			if lo > hi {
				return field{}, fail("range %q runs backwards", rng)
			}
		case hasStep:
			hi = max(lo, fs.last)
		}
		for v := lo; v <= hi; v += step {
			if k == fDow {
				f.bits |= 1 << (v % 7) // 7 is Sunday
			} else {
				f.bits |= 1 << v
			}
		}
	}
	return f, nil
}

// value parses one value of the field; msg is "" when it is valid.
func (fs *fieldSpec) value(s, item string) (v int, msg string) {
	if s == "" {
		return 0, fmt.Sprintf("missing value in %q", item)
	}
	if isDigits(s) {
		n, err := strconv.Atoi(s)
		if err != nil || len(s) > 4 || n < fs.min || n > fs.max {
			return 0, fmt.Sprintf("value %s out of range %d-%d", s, fs.min, fs.max)
		}
		return n, ""
	}
	for i, name := range fs.names {
		if strings.EqualFold(s, name) {
			return fs.min + i, ""
		}
	}
	msg = fmt.Sprintf("%q is not a number", s)
	if fs.names != nil {
		msg += fmt.Sprintf(" or a name %s-%s", fs.names[0], fs.names[len(fs.names)-1])
	}
	if (fs == &fieldSpecs[fDom] || fs == &fieldSpecs[fDow]) && strings.ContainsAny(s, "LlWw#?") {
		msg += " (the L, W, # and ? extensions are not supported)"
	}
	return 0, msg
}

// step parses the n of "/n"; msg is "" when it is valid.
func (fs *fieldSpec) step(s string) (n int, msg string) {
	count := fs.last - fs.min + 1
	if s == "" {
		return 0, "missing step after /"
	}
	if !isDigits(s) {
		return 0, fmt.Sprintf("step %q is not a number", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || len(s) > 4 || n < 1 || n > count {
		return 0, fmt.Sprintf("step %s out of range 1-%d", s, count)
	}
	return n, ""
}

func isDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// String returns the normalized spec: shorthands by their canonical name
// (@annually is "@yearly", @midnight is "@daily"), @every with the
// duration as time.Duration writes it ("@every 1h30m0s"), and cron fields
// as numbers with runs of three or more values as ranges, five fields when
// the seconds field is 0. Parse(s.String()) == s for every parsed
// Schedule. The zero Schedule's String is "".
func (s Schedule) String() string {
	switch {
	case s.every > 0:
		return "@every " + (time.Duration(s.every) * time.Second).String()
	case s.name != "":
		return s.name
	case s.fields[fMinute].bits == 0:
		return ""
	}
	parts := make([]string, 0, numFields)
	for k, f := range s.fields {
		if k == fSecond && f == (field{bits: 1}) {
			continue
		}
		parts = append(parts, f.String())
	}
	return strings.Join(parts, " ")
}

func (f field) String() string {
	switch f.star {
	case 0:
	case 1:
		return "*"
	default:
		return "*/" + strconv.Itoa(int(f.star))
	}
	var b strings.Builder
	for v := 0; v < 64; v++ {
		if f.bits&(1<<v) == 0 {
			continue
		}
		end := v
		for end+1 < 64 && f.bits&(1<<(end+1)) != 0 {
			end++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		switch end - v {
		case 0:
			b.WriteString(strconv.Itoa(v))
		case 1:
			fmt.Fprintf(&b, "%d,%d", v, end)
		default:
			fmt.Fprintf(&b, "%d-%d", v, end)
		}
		v = end
	}
	return b.String()
}
