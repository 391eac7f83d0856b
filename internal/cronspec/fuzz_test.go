package cronspec_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pgsched/pgsched/internal/cronspec"
)

// FuzzParse parses arbitrary specs. Parse must not panic, its errors must
// wrap ErrInvalid, String must round-trip, and Next must return ticks
// strictly after its input, skip none (Next of one second before a tick is
// that tick), and be monotone, around the daylight-saving transitions of
// several zones.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"* * * * *", "*/15 * * * *", "30 2 * * *", "0 * * * *", "*/30 * * * *", "15 30 2 * * *",
		"0 0 29 2 *", "0 0 30 2 *", "0 0 31 * *", "0 0 13 * 5", "0 0 */2 * 5", "0 0 29 2 */7",
		"0 9 * * mon-fri", "0 0 1 jan,jul *", "10-50/20 * * * *", "5/20 * * * *", "0 0 * * 7",
		"*/10 * * * * *", "58-59 59 23 31 12 *", "@hourly", "@daily", "@weekly", "@monthly",
		"@yearly", "@annually", "@midnight", "@every 1h30m", "@every 1s", "@every 500ms",
		"@every 2562047h", "0 0 L * *", "1,,2 * * * *", "*,5 * * * *", "99999999999999999999 * * * *",
	} {
		f.Add(seed)
	}
	var zones []*time.Location
	for _, name := range []string{"", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Pacific/Apia"} {
		zones = append(zones, mustZone(f, name))
	}
	var afters []time.Time
	for _, s := range []string{
		"2026-03-08T06:59:59Z",     // New York, a second before spring forward
		"2026-11-01T05:30:00Z",     // New York, first pass of the repeated hour
		"2026-11-01T06:30:00.5Z",   // New York, second pass
		"2026-03-29T00:59:59Z",     // Berlin, before spring forward
		"2026-10-25T00:30:00Z",     // Berlin, first pass
		"2026-10-25T01:30:00Z",     // Berlin, second pass
		"2026-10-03T15:45:00Z",     // Lord Howe, before its 30-minute spring forward
		"2011-12-29T09:30:00Z",     // Apia, before it skipped 30 December 2011
		"2096-02-28T23:00:00Z",     // before the last leap day of the century
		"1969-12-31T23:59:59.999Z", // before the epoch
		"0001-01-01T00:00:00Z",     // the zero Time
		"9999-12-31T23:59:59Z",
	} {
		afters = append(afters, mustTime(f, s))
	}
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := cronspec.Parse(spec)
		if err != nil {
			if !errors.Is(err, cronspec.ErrInvalid) || !strings.HasPrefix(err.Error(), "cronspec: ") {
				t.Fatalf("Parse(%q) error %q: want a cronspec error that wraps ErrInvalid", spec, err)
			}
			if s != (cronspec.Schedule{}) {
				t.Fatalf("Parse(%q) returned a Schedule with its error", spec)
			}
			return
		}
		norm := s.String()
		if again, err := cronspec.Parse(norm); err != nil || again != s || again.String() != norm {
			t.Fatalf("Parse(%q) = %q; parsing that again: %q, %v", spec, norm, again.String(), err)
		}
		for _, loc := range zones {
			for _, a := range afters {
				next := s.Next(a, loc)
				later := s.Next(a.Add(37*time.Minute), loc)
				if next.IsZero() {
					if !later.IsZero() {
						t.Fatalf("%q in %s: no tick after %s, but %s after %s", norm, loc, a, later, a.Add(37*time.Minute))
					}
					continue
				}
				if !next.After(a) {
					t.Fatalf("%q in %s: Next(%s) = %s, not after it", norm, loc, a, next)
				}
				if !later.IsZero() && later.Before(next) {
					t.Fatalf("%q in %s: Next(%s) = %s, but Next(%s) = %s is earlier", norm, loc, a, next, a.Add(37*time.Minute), later)
				}
				if p := next.Add(-time.Second); !p.Before(a) {
					if got := s.Next(p, loc); !got.Equal(next) {
						t.Fatalf("%q in %s: Next(%s) = %s, but Next(%s) = %s", norm, loc, a, next, p, got)
					}
				}
				if n2 := s.Next(next, loc); !n2.IsZero() && !n2.After(next) {
					t.Fatalf("%q in %s: Next(%s) = %s, not after it", norm, loc, next, n2)
				}
			}
		}
	})
}
