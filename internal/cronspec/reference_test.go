package cronspec_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgsched/pgsched/internal/cronspec"
)

// This file is the reference: a brute-force implementation of the spec and
// of the daylight-saving rule, written separately from the package and as
// plainly as possible. It reads specs with its own parser and steps through
// time one minute (or one second) at a time over a bounded window, which
// is too slow for the package but easy to check by eye. The tests compare
// the package's Next with it on generated specs.

// refSpec is the reference's reading of a cron spec.
type refSpec struct {
	sets             [6][64]bool // second, minute, hour, day of month, month, day of week (0-6)
	domStar, dowStar bool
}

var refNames = map[string]int{
	"JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6, "JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10, "NOV": 11, "DEC": 12,
	"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6,
}

func refNumber(t *testing.T, s string) int {
	if n, ok := refNames[strings.ToUpper(s)]; ok {
		return n
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("reference: bad number %q", s)
	}
	return n
}

func refParse(t *testing.T, spec string) refSpec {
	f := strings.Fields(spec)
	if len(f) == 5 {
		f = append([]string{"0"}, f...)
	}
	first := [6]int{0, 0, 0, 1, 1, 0}
	last := [6]int{59, 59, 23, 31, 12, 6}
	var r refSpec
	for i, text := range f {
		for _, item := range strings.Split(text, ",") {
			rng, stepText, hasStep := strings.Cut(item, "/")
			step := 1
			if hasStep {
				step = refNumber(t, stepText)
			}
			var lo, hi int
			if rng == "*" {
				lo, hi = first[i], last[i]
			} else if a, b, ok := strings.Cut(rng, "-"); ok {
				lo, hi = refNumber(t, a), refNumber(t, b)
			} else {
				lo = refNumber(t, rng)
				hi = lo
				if hasStep {
					hi = last[i]
				}
			}
			for v := lo; v <= hi; v += step {
				if i == 5 {
					r.sets[i][v%7] = true // 7 is Sunday
				} else {
					r.sets[i][v] = true
				}
			}
		}
	}
	r.domStar = strings.HasPrefix(f[3], "*")
	r.dowStar = strings.HasPrefix(f[5], "*")
	return r
}

// match reports whether the local time w (its fields read in UTC) matches.
func (r *refSpec) match(w time.Time) bool {
	if !r.sets[0][w.Second()] || !r.sets[1][w.Minute()] || !r.sets[2][w.Hour()] || !r.sets[4][int(w.Month())] {
		return false
	}
	dom, dow := r.sets[3][w.Day()], r.sets[5][int(w.Weekday())]
	if r.domStar || r.dowStar {
		return dom && dow
	}
	return dom || dow
}

// wallOf is the local time of the instant t in loc, as a time whose UTC
// fields are the local fields.
func wallOf(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), 0, time.UTC)
}

// refNext is the reference Next for specs with a zero seconds field in a
// zone whose offsets and transitions fall on whole minutes. It steps the
// instant t minute by minute and keeps high, the latest local time the
// clock has shown before t. At t the clock shows each local time in
// (high, local time at t] for the first time, so t is a tick when one of
// them matches: normally the one local time at t; after a gap also the
// skipped ones; during a repeated hour none. The walk starts three hours
// before after so that high knows about a repeated hour already begun.
// It returns false when there is no tick up to after+window.
func refNext(r *refSpec, after time.Time, loc *time.Location, window time.Duration) (time.Time, bool) {
	t := after.Truncate(time.Minute).Add(-3 * time.Hour)
	high := wallOf(t, loc)
	for end := after.Add(window); !t.After(end); {
		t = t.Add(time.Minute)
		w := wallOf(t, loc)
		if t.After(after) {
			for x := high.Add(time.Minute); !x.After(w); x = x.Add(time.Minute) {
				if r.match(x) {
					return t, true
				}
			}
		}
		if w.After(high) {
			high = w
		}
	}
	return time.Time{}, false
}

// refNextSeconds is the reference Next in UTC for six-field specs: it tries
// every second.
func refNextSeconds(r *refSpec, after time.Time, window time.Duration) (time.Time, bool) {
	for t := after.Truncate(time.Second).Add(time.Second); !t.After(after.Add(window)); t = t.Add(time.Second) {
		if r.match(t.UTC()) {
			return t, true
		}
	}
	return time.Time{}, false
}

// genField returns a random field text for field i (0 second ... 5 day of
// week). Day-of-week values go up to 7; months and weekdays sometimes use
// names.
func genField(rng *rand.Rand, i int, starBias int) string {
	lo := [6]int{0, 0, 0, 1, 1, 0}[i]
	hi := [6]int{59, 59, 23, 31, 12, 7}[i]
	last := [6]int{59, 59, 23, 31, 12, 6}[i]
	val := func(v int) string {
		switch {
		case i == 4 && rng.IntN(4) == 0:
			return []string{"jan", "Feb", "MAR", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}[v-1]
		case i == 5 && v < 7 && rng.IntN(4) == 0:
			return []string{"sun", "Mon", "TUE", "wed", "thu", "fri", "sat"}[v]
		}
		return strconv.Itoa(v)
	}
	if rng.IntN(10) < starBias {
		if rng.IntN(3) == 0 {
			return fmt.Sprintf("*/%d", 1+rng.IntN(min(last-lo+1, 20)))
		}
		return "*"
	}
	item := func() string {
		a := lo + rng.IntN(hi-lo+1)
		switch rng.IntN(5) {
		case 0, 1:
			return val(a)
		case 2:
			b := a + rng.IntN(hi-a+1)
			return val(a) + "-" + val(b)
		case 3:
			b := a + rng.IntN(hi-a+1)
			return fmt.Sprintf("%s-%s/%d", val(a), val(b), 1+rng.IntN(5))
		default:
			a = lo + rng.IntN(last-lo+1)
			return fmt.Sprintf("%s/%d", val(a), 1+rng.IntN(min(10, last-lo+1)))
		}
	}
	items := []string{item()}
	for rng.IntN(3) == 0 {
		items = append(items, item())
	}
	return strings.Join(items, ",")
}

func TestNextMatchesReference(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	zones := []*time.Location{
		time.UTC,
		mustZone(t, "America/New_York"),
		mustZone(t, "Europe/Berlin"),
		mustZone(t, "Australia/Lord_Howe"), // 30-minute daylight-saving shift
		mustZone(t, "Asia/Kolkata"),
	}
	// Moments just before the 2026 transitions of New York and Berlin, and
	// inside their repeated hours.
	near := []string{
		"2026-03-07T20:00:00Z", "2026-03-08T06:10:00Z", "2026-10-31T20:00:00Z", "2026-11-01T05:40:00Z", "2026-11-01T06:20:00Z",
		"2026-03-28T20:00:00Z", "2026-03-29T00:50:00Z", "2026-10-24T20:00:00Z", "2026-10-25T00:40:00Z", "2026-10-25T01:20:00Z",
		"2026-04-04T12:00:00Z", "2026-10-03T12:00:00Z", // Lord Howe
	}
	const window = 3 * 24 * time.Hour
	specs := 250
	if testing.Short() {
		specs = 50
	}
	ticks := 0
	for range specs {
		fields := []string{"0"}
		for i := 1; i < 6; i++ {
			fields = append(fields, genField(rng, i, []int{0, 4, 5, 7, 8, 7}[i]))
		}
		spec := strings.Join(fields[1:], " ")
		s, err := cronspec.Parse(spec)
		if err != nil {
			t.Fatalf("Parse(%q): %v", spec, err)
		}
		r := refParse(t, spec)
		for range 3 {
			loc := zones[rng.IntN(len(zones))]
			var after time.Time
			if rng.IntN(2) == 0 {
				after = mustTime(t, near[rng.IntN(len(near))]).Add(time.Duration(rng.IntN(3600)) * time.Second)
			} else {
				after = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(int64(365 * 24 * time.Hour))))
			}
			got := s.Next(after, loc)
			want, ok := refNext(&r, after, loc, window)
			switch {
			case ok && !got.Equal(want):
				t.Errorf("%q in %s after %s: Next = %s, reference %s", spec, loc, after.In(loc).Format(time.RFC3339), got.Format(time.RFC3339), want.In(loc).Format(time.RFC3339))
			case !ok && !got.IsZero() && !got.After(after.Add(window)):
				t.Errorf("%q in %s after %s: Next = %s, reference has no tick until %s", spec, loc, after.In(loc).Format(time.RFC3339), got.Format(time.RFC3339), after.Add(window).In(loc).Format(time.RFC3339))
			case ok:
				ticks++
			}
		}
	}
	t.Logf("%d of %d comparisons found a tick", ticks, 3*specs)
	if ticks < specs {
		t.Errorf("only %d of %d comparisons found a tick in the window: the generator makes too many sparse specs", ticks, 3*specs)
	}
}

// TestNextMatchesReferenceAtTransitions runs the specs the DST table uses
// through a whole day around each transition, tick by tick.
func TestNextMatchesReferenceAtTransitions(t *testing.T) {
	t.Parallel()
	for _, zc := range []struct {
		zone string
		days []string
	}{
		{"America/New_York", []string{"2026-03-08", "2026-11-01"}},
		{"Europe/Berlin", []string{"2026-03-29", "2026-10-25"}},
	} {
		loc := mustZone(t, zc.zone)
		for _, day := range zc.days {
			for _, spec := range []string{"30 2 * * *", "30 1 * * *", "0 * * * *", "*/30 * * * *", "*/15 * * * *", "*/7 * * * *", "0 0-4 * * *", "@hourly", "@daily"} {
				s, err := cronspec.Parse(spec)
				if err != nil {
					t.Fatal(err)
				}
				r := refParse(t, strings.NewReplacer("@hourly", "0 * * * *", "@daily", "0 0 * * *").Replace(spec))
				d, _ := time.ParseInLocation(time.DateOnly, day, loc)
				at, end := d.Add(-12*time.Hour), d.Add(36*time.Hour)
				for at.Before(end) {
					want, ok := refNext(&r, at, loc, 48*time.Hour)
					got := s.Next(at, loc)
					if !ok || !got.Equal(want) {
						t.Fatalf("%q in %s after %s: Next = %s, reference %s (%v)", spec, zc.zone, at.In(loc).Format(time.RFC3339), got.In(loc).Format(time.RFC3339), want.In(loc).Format(time.RFC3339), ok)
					}
					at = got
				}
			}
		}
	}
}

func TestNextMatchesReferenceSeconds(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	const window = 3 * time.Hour
	for range 60 {
		fields := make([]string, 6)
		for i := range fields {
			fields[i] = genField(rng, i, []int{3, 6, 8, 9, 9, 9}[i])
		}
		spec := strings.Join(fields, " ")
		s, err := cronspec.Parse(spec)
		if err != nil {
			t.Fatalf("Parse(%q): %v", spec, err)
		}
		r := refParse(t, spec)
		after := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(int64(365 * 24 * time.Hour))))
		got := s.Next(after, time.UTC)
		want, ok := refNextSeconds(&r, after, window)
		if ok && !got.Equal(want) || !ok && !got.IsZero() && !got.After(after.Add(window)) {
			t.Errorf("%q after %s: Next = %s, reference %s (%v)", spec, after.Format(time.RFC3339Nano), got.Format(time.RFC3339), want.Format(time.RFC3339), ok)
		}
	}
}
