package cronspec_test

import (
	"archive/zip"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgsched/pgsched/internal/cronspec"
)

func mustZone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := cronspec.LoadZone(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// nextCase checks a chain of ticks: want[0] is the first tick after
// after, want[1] the first tick after want[0], and so on. The wanted times
// carry the zone's offset, which the result must have too, so a test says
// which side of a transition a tick is on.
type nextCase struct {
	name  string
	spec  string
	zone  string
	after string
	want  []string // RFC 3339; "" is the zero Time (no tick)
}

func runNext(t *testing.T, cases []nextCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name+"/"+tc.spec, func(t *testing.T) {
			s, err := cronspec.Parse(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			loc := mustZone(t, tc.zone)
			at := mustTime(t, tc.after)
			for i, want := range tc.want {
				got := s.Next(at, loc)
				if want == "" {
					if !got.IsZero() {
						t.Fatalf("tick %d after %s: got %s, want none", i, at.Format(time.RFC3339), got.Format(time.RFC3339))
					}
					return
				}
				if got.Format(time.RFC3339Nano) != want || got.Location() != loc {
					t.Fatalf("tick %d after %s: got %s (%s), want %s", i, at.Format(time.RFC3339), got.Format(time.RFC3339Nano), got.Location(), want)
				}
				at = got
			}
		})
	}
}

func TestNextForms(t *testing.T) {
	t.Parallel()
	runNext(t, []nextCase{
		// Five fields.
		{"step", "*/15 * * * *", "", "2026-01-01T10:07:30Z",
			[]string{"2026-01-01T10:15:00Z", "2026-01-01T10:30:00Z", "2026-01-01T10:45:00Z", "2026-01-01T11:00:00Z"}},
		{"strictly after", "0 * * * *", "", "2026-01-01T10:00:00Z", []string{"2026-01-01T11:00:00Z"}},
		{"strictly after, nanoseconds", "0 * * * *", "", "2026-01-01T10:59:59.999999999Z", []string{"2026-01-01T11:00:00Z"}},
		{"daily", "5 4 * * *", "", "2026-01-01T04:05:00Z", []string{"2026-01-02T04:05:00Z", "2026-01-03T04:05:00Z"}},
		{"weekday range", "0 22 * * 1-5", "", "2026-01-02T23:00:00Z", []string{"2026-01-05T22:00:00Z", "2026-01-06T22:00:00Z"}},
		{"weekday names", "0 9 * * mon-FRI", "", "2026-01-02T09:00:00Z", []string{"2026-01-05T09:00:00Z"}},
		{"month names", "0 9 1 jan,JUL *", "", "2026-01-01T09:00:00Z", []string{"2026-07-01T09:00:00Z", "2027-01-01T09:00:00Z"}},
		{"stepped range", "10-50/20 * * * *", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T00:10:00Z", "2026-01-01T00:30:00Z", "2026-01-01T00:50:00Z", "2026-01-01T01:10:00Z"}},
		{"start/step", "5/20 * * * *", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T00:05:00Z", "2026-01-01T00:25:00Z", "2026-01-01T00:45:00Z", "2026-01-01T01:05:00Z"}},
		{"list and range", "0,30 8-10 * * *", "", "2026-01-01T10:30:00Z",
			[]string{"2026-01-02T08:00:00Z", "2026-01-02T08:30:00Z", "2026-01-02T09:00:00Z"}},
		{"weekday 7 is Sunday", "0 0 * * 7", "", "2026-03-02T00:00:00Z", []string{"2026-03-08T00:00:00Z", "2026-03-15T00:00:00Z"}},
		{"weekday 0 is Sunday", "0 0 * * 0", "", "2026-03-02T00:00:00Z", []string{"2026-03-08T00:00:00Z"}},
		{"weekday range to 7", "0 0 * * 6-7", "", "2026-03-02T00:00:00Z", []string{"2026-03-07T00:00:00Z", "2026-03-08T00:00:00Z", "2026-03-14T00:00:00Z"}},
		{"year rollover", "0 0 1 * *", "", "2026-12-15T00:00:00Z", []string{"2027-01-01T00:00:00Z"}},
		{"last minute of the year", "59 23 31 12 *", "", "2026-12-31T23:59:00Z", []string{"2027-12-31T23:59:00Z"}},
		{"every minute", "* * * * *", "", "2026-01-01T00:00:30Z", []string{"2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"}},
		{"zone", "0 9 * * *", "Europe/Berlin", "2026-01-01T09:00:00Z", []string{"2026-01-02T09:00:00+01:00"}},
		{"nil zone is UTC", "0 9 * * *", "", "2026-01-01T09:00:00+01:00", []string{"2026-01-01T09:00:00Z"}},
		// Past the transitions Go lists, on the last day of a leap year,
		// Time.ZoneBounds ends the zone before the instant (golang/go#81583).
		{"last day of a leap year, rule-based zone", "@yearly", "Europe/Berlin", "2096-12-31T22:00:00Z", []string{"2097-01-01T00:00:00+01:00"}},
		{"last day of a leap year, southern summer", "0 * * * *", "Australia/Sydney", "2040-12-31T12:00:00Z",
			[]string{"2041-01-01T00:00:00+11:00", "2041-01-01T01:00:00+11:00"}},
		{"last day of a leap year, every minute", "* * * * *", "America/New_York", "2096-12-31T23:59:00-05:00",
			[]string{"2097-01-01T00:00:00-05:00", "2097-01-01T00:01:00-05:00"}},

		// Day of month and day of week (Vixie cron).
		{"both restricted: either matches", "0 0 13 * 5", "", "2026-04-10T00:00:00Z",
			[]string{"2026-04-13T00:00:00Z", "2026-04-17T00:00:00Z", "2026-04-24T00:00:00Z", "2026-05-01T00:00:00Z"}},
		{"dom range covering the month ORs with dow", "0 0 1-31 * 1", "", "2026-04-01T00:00:00Z", []string{"2026-04-02T00:00:00Z"}},
		{"dom star: dow only", "0 0 * * 1", "", "2026-04-01T00:00:00Z", []string{"2026-04-06T00:00:00Z"}},
		{"dow star: dom only", "0 0 13 * *", "", "2026-04-01T00:00:00Z", []string{"2026-04-13T00:00:00Z", "2026-05-13T00:00:00Z"}},
		{"dom */2 starts with *: both must match", "0 0 */2 * 5", "", "2026-04-01T00:00:00Z",
			[]string{"2026-04-03T00:00:00Z", "2026-04-17T00:00:00Z", "2026-05-01T00:00:00Z"}},
		{"dow */7 starts with *: both must match", "0 0 1 * */7", "", "2026-01-01T00:00:00Z", []string{"2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z", "2026-11-01T00:00:00Z"}},

		// Six fields: seconds first.
		{"seconds step", "*/10 * * * * *", "", "2026-01-01T00:00:05Z",
			[]string{"2026-01-01T00:00:10Z", "2026-01-01T00:00:20Z", "2026-01-01T00:00:30Z"}},
		{"seconds daily", "30 0 12 * * *", "", "2026-01-01T12:00:30Z", []string{"2026-01-02T12:00:30Z"}},
		{"seconds minute wrap", "58-59 * * * * *", "", "2026-01-01T23:59:59Z", []string{"2026-01-02T00:00:58Z", "2026-01-02T00:00:59Z", "2026-01-02T00:01:58Z"}},
		{"six fields with zero seconds", "0 0 0 1 1 *", "", "2026-05-13T10:20:30Z", []string{"2027-01-01T00:00:00Z"}},

		// Shorthands.
		{"hourly", "@hourly", "", "2026-05-13T10:20:30Z", []string{"2026-05-13T11:00:00Z", "2026-05-13T12:00:00Z"}},
		{"daily", "@daily", "", "2026-05-13T10:20:30Z", []string{"2026-05-14T00:00:00Z", "2026-05-15T00:00:00Z"}},
		{"midnight", "@midnight", "", "2026-05-13T10:20:30Z", []string{"2026-05-14T00:00:00Z"}},
		{"case-insensitive", "@DAILY", "", "2026-05-13T10:20:30Z", []string{"2026-05-14T00:00:00Z"}},
		{"weekly", "@weekly", "", "2026-05-13T10:20:30Z", []string{"2026-05-17T00:00:00Z", "2026-05-24T00:00:00Z"}},
		{"monthly", "@monthly", "", "2026-05-13T10:20:30Z", []string{"2026-06-01T00:00:00Z", "2026-07-01T00:00:00Z"}},
		{"yearly", "@yearly", "", "2026-05-13T10:20:30Z", []string{"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"}},
		{"annually", "@annually", "", "2026-05-13T10:20:30Z", []string{"2027-01-01T00:00:00Z"}},
		{"daily in a zone", "@daily", "Europe/Berlin", "2026-05-13T10:20:30Z", []string{"2026-05-14T00:00:00+02:00"}},

		// @every: aligned to the Unix epoch, the zone only names the result's location.
		{"every hour", "@every 1h", "", "2026-05-13T10:20:30Z", []string{"2026-05-13T11:00:00Z", "2026-05-13T12:00:00Z"}},
		{"every hour in a half-hour zone", "@every 1h", "Asia/Kolkata", "2026-05-13T10:20:30Z", []string{"2026-05-13T16:30:00+05:30"}},
		{"every 90m", "@every 90m", "", "2026-05-13T10:20:30Z", []string{"2026-05-13T10:30:00Z", "2026-05-13T12:00:00Z"}},
		{"every 7m from the epoch", "@every 7m", "", "1970-01-01T00:00:00Z", []string{"1970-01-01T00:07:00Z"}},
		{"every 7m before the epoch", "@every 7m", "", "1969-12-31T23:59:59Z", []string{"1970-01-01T00:00:00Z"}},
		{"every 7m", "@every 7m", "", "2026-03-01T00:00:01Z", []string{"2026-03-01T00:06:00Z", "2026-03-01T00:13:00Z"}},
		{"every second", "@every 1s", "", "2026-05-13T10:20:30.5Z", []string{"2026-05-13T10:20:31Z", "2026-05-13T10:20:32Z"}},
		{"every day across fall back", "@every 24h", "America/New_York", "2026-10-31T12:00:00-04:00",
			[]string{"2026-10-31T20:00:00-04:00", "2026-11-01T19:00:00-05:00"}},
		{"every 30m across spring forward", "@every 30m", "Europe/Berlin", "2026-03-29T01:40:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-29T03:30:00+02:00"}},
	})
}

func TestNextLeapDaysAndMonthEnds(t *testing.T) {
	t.Parallel()
	runNext(t, []nextCase{
		{"leap day", "0 0 29 2 *", "", "2026-01-01T00:00:00Z", []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{"leap day skips 2100", "0 0 29 2 *", "", "2096-02-29T00:00:00Z", []string{"2104-02-29T00:00:00Z"}},
		{"Feb 28-29 in 2100", "0 0 28-29 2 *", "", "2100-02-27T00:00:00Z", []string{"2100-02-28T00:00:00Z", "2101-02-28T00:00:00Z"}},
		{"leap day or Mondays in February", "0 0 29 2 1", "", "2028-02-27T00:00:00Z",
			[]string{"2028-02-28T00:00:00Z", "2028-02-29T00:00:00Z", "2029-02-05T00:00:00Z"}},
		{"leap day in a zone", "30 2 29 2 *", "Europe/Berlin", "2026-01-01T00:00:00Z", []string{"2028-02-29T02:30:00+01:00"}},
		{"31st skips short months", "0 0 31 * *", "", "2026-01-31T00:00:00Z",
			[]string{"2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z", "2026-08-31T00:00:00Z", "2026-10-31T00:00:00Z", "2026-12-31T00:00:00Z"}},
		{"30th skips February", "0 0 30 * *", "", "2026-01-30T00:00:00Z", []string{"2026-03-30T00:00:00Z"}},
		{"30 February never", "0 0 30 2 *", "", "2026-01-01T00:00:00Z", []string{""}},
		{"31st of 30-day months never", "0 0 31 4,6,9,11 *", "", "2026-01-01T00:00:00Z", []string{""}},
		{"31 February never with dow */7", "0 0 31 2 */7", "", "2026-01-01T00:00:00Z", []string{""}},
		{"30 February or Mondays", "0 0 30 2 MON", "", "2026-01-01T00:00:00Z", []string{"2026-02-02T00:00:00Z"}},
	})
}

// The transitions: America/New_York springs forward on 2026-03-08 at 02:00
// EST (02:00-02:59 does not exist) and falls back on 2026-11-01 at 02:00
// EDT (01:00-01:59 happens twice); Europe/Berlin springs forward on
// 2026-03-29 at 02:00 CET (02:00-02:59 does not exist) and falls back on
// 2026-10-25 at 03:00 CEST (02:00-02:59 happens twice).
func TestNextDST(t *testing.T) {
	t.Parallel()
	const ny, berlin = "America/New_York", "Europe/Berlin"
	runNext(t, []nextCase{
		// New York, spring forward.
		{"NY spring daily", "30 2 * * *", ny, "2026-03-07T12:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"NY spring hourly", "0 * * * *", ny, "2026-03-08T00:30:00-05:00",
			[]string{"2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"}},
		{"NY spring half-hourly", "*/30 * * * *", ny, "2026-03-08T01:00:00-05:00",
			[]string{"2026-03-08T01:30:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00"}},
		{"NY spring seconds", "30 * * * * *", ny, "2026-03-08T01:58:45-05:00",
			[]string{"2026-03-08T01:59:30-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:00:30-04:00"}},
		{"NY spring seconds daily", "15 30 2 * * *", ny, "2026-03-08T00:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:15-04:00"}},
		// New York, fall back.
		{"NY fall daily", "30 2 * * *", ny, "2026-10-31T12:00:00-04:00",
			[]string{"2026-11-01T02:30:00-05:00", "2026-11-02T02:30:00-05:00"}},
		{"NY fall daily in the repeated hour", "30 1 * * *", ny, "2026-10-31T12:00:00-04:00",
			[]string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"}},
		{"NY fall daily from the second pass", "30 1 * * *", ny, "2026-11-01T01:00:00-05:00",
			[]string{"2026-11-02T01:30:00-05:00"}},
		{"NY fall hourly", "0 * * * *", ny, "2026-11-01T00:30:00-04:00",
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T02:00:00-05:00", "2026-11-01T03:00:00-05:00"}},
		{"NY fall hourly from the second 01:00", "0 * * * *", ny, "2026-11-01T01:00:00-05:00",
			[]string{"2026-11-01T02:00:00-05:00"}},
		{"NY fall half-hourly", "*/30 * * * *", ny, "2026-11-01T00:45:00-04:00",
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T02:00:00-05:00", "2026-11-01T02:30:00-05:00"}},
		{"NY fall half-hourly from the second pass", "*/30 * * * *", ny, "2026-11-01T01:10:00-05:00",
			[]string{"2026-11-01T02:00:00-05:00"}},
		{"NY fall quarter-hourly", "*/15 * * * *", ny, "2026-11-01T01:30:00-04:00",
			[]string{"2026-11-01T01:45:00-04:00", "2026-11-01T02:00:00-05:00"}},
		{"NY fall seconds", "*/20 59 1 * * *", ny, "2026-11-01T01:59:30-04:00",
			[]string{"2026-11-01T01:59:40-04:00", "2026-11-02T01:59:00-05:00"}},

		// Berlin, spring forward.
		{"Berlin spring daily", "30 2 * * *", berlin, "2026-03-28T12:00:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"}},
		{"Berlin spring hourly", "0 * * * *", berlin, "2026-03-29T00:30:00+01:00",
			[]string{"2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00"}},
		{"Berlin spring half-hourly", "*/30 * * * *", berlin, "2026-03-29T01:00:00+01:00",
			[]string{"2026-03-29T01:30:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:30:00+02:00"}},
		{"Berlin spring quarter-hourly", "*/15 * * * *", berlin, "2026-03-29T01:30:00+01:00",
			[]string{"2026-03-29T01:45:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:15:00+02:00"}},
		{"Berlin spring seconds daily", "15 30 2 * * *", berlin, "2026-03-28T12:00:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:30:15+02:00"}},
		// Berlin, fall back.
		{"Berlin fall daily", "30 2 * * *", berlin, "2026-10-24T12:00:00+02:00",
			[]string{"2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"}},
		{"Berlin fall daily from the second pass", "30 2 * * *", berlin, "2026-10-25T02:10:00+01:00",
			[]string{"2026-10-26T02:30:00+01:00"}},
		{"Berlin fall hourly", "0 * * * *", berlin, "2026-10-25T01:30:00+02:00",
			[]string{"2026-10-25T02:00:00+02:00", "2026-10-25T03:00:00+01:00", "2026-10-25T04:00:00+01:00"}},
		{"Berlin fall half-hourly", "*/30 * * * *", berlin, "2026-10-25T01:45:00+02:00",
			[]string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-25T03:00:00+01:00"}},
		{"Berlin fall seconds daily", "15 30 2 * * *", berlin, "2026-10-24T12:00:00+02:00",
			[]string{"2026-10-25T02:30:15+02:00", "2026-10-26T02:30:15+01:00"}},
	})
}

func TestZeroSchedule(t *testing.T) {
	t.Parallel()
	var s cronspec.Schedule
	if got := s.Next(time.Now(), nil); !got.IsZero() {
		t.Errorf("zero Schedule: Next = %s, want the zero Time", got)
	}
	if got := s.String(); got != "" {
		t.Errorf("zero Schedule: String = %q, want \"\"", got)
	}
}

func TestString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ spec, want string }{
		{"*/15 * * * *", "*/15 * * * *"},
		{" 0\t0  * * * ", "0 0 * * *"},
		{"0 0 0 * * *", "0 0 * * *"},
		{"30 0 0 * * *", "30 0 0 * * *"},
		{"*/1 * * * *", "* * * * *"},
		{"0 9 * * mon-fri", "0 9 * * 1-5"},
		{"0 0 * * 7", "0 0 * * 0"},
		{"0 0 * * 5-7", "0 0 * * 0,5,6"},
		{"0 0 * * 0-7", "0 0 * * 0-6"},
		{"0 0 1 jan,jul *", "0 0 1 1,7 *"},
		{"10-50/20 * * * *", "10,30,50 * * * *"},
		{"0,1,2,3,7,8 * * * *", "0-3,7,8 * * * *"},
		{"0 0 1-31 * 1", "0 0 1-31 * 1"},
		{"0 0 */2 * 5", "0 0 */2 * 5"},
		{"@midnight", "@daily"},
		{"@ANNUALLY", "@yearly"},
		{"@hourly", "@hourly"},
		{"@every 90m", "@every 1h30m0s"},
		{"@EVERY 3600s", "@every 1h0m0s"},
	} {
		s, err := cronspec.Parse(tc.spec)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.spec, err)
			continue
		}
		if got := s.String(); got != tc.want {
			t.Errorf("Parse(%q).String() = %q, want %q", tc.spec, got, tc.want)
		}
		if again, err := cronspec.Parse(s.String()); err != nil || again != s {
			t.Errorf("Parse(%q) = %v, %v; want the same Schedule as Parse(%q)", s.String(), again, err, tc.spec)
		}
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ spec, want string }{
		{"", `cronspec: empty spec`},
		{"   ", `cronspec: empty spec`},
		{"* * *", `cronspec: want 5 or 6 fields, got 3`},
		{"0 0 0 * * * 2026", `cronspec: want 5 or 6 fields, got 7`},
		// Each cron field names itself.
		{"61 * * * *", `cronspec: minute field "61": value 61 out of range 0-59`},
		{"60 * * * * *", `cronspec: second field "60": value 60 out of range 0-59`},
		{"0 24 * * *", `cronspec: hour field "24": value 24 out of range 0-23`},
		{"0 0 0 * *", `cronspec: day-of-month field "0": value 0 out of range 1-31`},
		{"0 0 32 * *", `cronspec: day-of-month field "32": value 32 out of range 1-31`},
		{"0 0 * 13 *", `cronspec: month field "13": value 13 out of range 1-12`},
		{"0 0 * 0 *", `cronspec: month field "0": value 0 out of range 1-12`},
		{"0 0 * * 8", `cronspec: day-of-week field "8": value 8 out of range 0-7`},
		{"99999999999999999999 * * * *", `cronspec: minute field "99999999999999999999": value 99999999999999999999 out of range 0-59`},
		{"0 0 1,40 * *", `cronspec: day-of-month field "1,40": value 40 out of range 1-31`},
		// Names.
		{"0 0 * FOO *", `cronspec: month field "FOO": "FOO" is not a number or a name JAN-DEC`},
		{"0 0 * * FOO", `cronspec: day-of-week field "FOO": "FOO" is not a number or a name SUN-SAT`},
		{"MON * * * *", `cronspec: minute field "MON": "MON" is not a number`},
		{"0 0 * MON *", `cronspec: month field "MON": "MON" is not a number or a name JAN-DEC`},
		{"0 0 * * JAN", `cronspec: day-of-week field "JAN": "JAN" is not a number or a name SUN-SAT`},
		// Quartz extensions.
		{"0 0 L * *", `cronspec: day-of-month field "L": "L" is not a number (the L, W, # and ? extensions are not supported)`},
		{"0 0 15W * *", `cronspec: day-of-month field "15W": "15W" is not a number (the L, W, # and ? extensions are not supported)`},
		{"0 0 ? * *", `cronspec: day-of-month field "?": "?" is not a number (the L, W, # and ? extensions are not supported)`},
		{"0 0 * * 5L", `cronspec: day-of-week field "5L": "5L" is not a number or a name SUN-SAT (the L, W, # and ? extensions are not supported)`},
		{"0 0 * * 1#2", `cronspec: day-of-week field "1#2": "1#2" is not a number or a name SUN-SAT (the L, W, # and ? extensions are not supported)`},
		// Steps, ranges and lists.
		{"*/0 * * * *", `cronspec: minute field "*/0": step 0 out of range 1-60`},
		{"*/61 * * * *", `cronspec: minute field "*/61": step 61 out of range 1-60`},
		{"0 */25 * * *", `cronspec: hour field "*/25": step 25 out of range 1-24`},
		{"0 0 * * */8", `cronspec: day-of-week field "*/8": step 8 out of range 1-7`},
		{"*/ * * * *", `cronspec: minute field "*/": missing step after /`},
		{"*/x * * * *", `cronspec: minute field "*/x": step "x" is not a number`},
		{"1/2/3 * * * *", `cronspec: minute field "1/2/3": step "2/3" is not a number`},
		{"5-1 * * * *", `cronspec: minute field "5-1": range "5-1" runs backwards`},
		{"0 0 * * FRI-MON", `cronspec: day-of-week field "FRI-MON": range "FRI-MON" runs backwards`},
		{"0 22-2 * * *", `cronspec: hour field "22-2": range "22-2" runs backwards`},
		{"1,,2 * * * *", `cronspec: minute field "1,,2": empty list item`},
		{"1, * * * *", `cronspec: minute field "1,": empty list item`},
		{"*,5 * * * *", `cronspec: minute field "*,5": * must stand alone, not in a list`},
		{"5,* * * * *", `cronspec: minute field "5,*": * must stand alone, not in a list`},
		{"*/15,3 * * * *", `cronspec: minute field "*/15,3": * must stand alone, not in a list`},
		{"-5 * * * *", `cronspec: minute field "-5": missing value in "-5"`},
		{"1- * * * *", `cronspec: minute field "1-": missing value in "1-"`},
		{"1-2-3 * * * *", `cronspec: minute field "1-2-3": "2-3" is not a number`},
		{"+5 * * * *", `cronspec: minute field "+5": "+5" is not a number`},
		// Shorthands and @every.
		{"@reboot", `cronspec: unknown shorthand "@reboot" (want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every <duration>)`},
		{"@", `cronspec: unknown shorthand "@" (want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every <duration>)`},
		{"@daily 5", `cronspec: @daily takes no arguments, got "5"`},
		{"@every", `cronspec: @every needs a duration, like "@every 1h30m"`},
		{"@every 500ms", `cronspec: @every "500ms": the interval must be at least 1s`},
		{"@every 0s", `cronspec: @every "0s": the interval must be at least 1s`},
		{"@every 0", `cronspec: @every "0": the interval must be at least 1s`},
		{"@every -1h", `cronspec: @every "-1h": the interval must be at least 1s`},
		{"@every 1.5s", `cronspec: @every "1.5s": the interval must be a whole number of seconds`},
		{"@every abc", `cronspec: @every "abc": not a duration (want Go syntax like 90s, 15m or 1h30m)`},
		{"@every 1d", `cronspec: @every "1d": not a duration (want Go syntax like 90s, 15m or 1h30m)`},
		{"@every 1h 2m", `cronspec: @every "1h 2m": want one duration, without spaces`},
	} {
		s, err := cronspec.Parse(tc.spec)
		if err == nil {
			t.Errorf("Parse(%q) = %q, want error %q", tc.spec, s, tc.want)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("Parse(%q) error:\n got  %s\n want %s", tc.spec, err, tc.want)
		}
		if !errors.Is(err, cronspec.ErrInvalid) {
			t.Errorf("Parse(%q) error %v does not wrap ErrInvalid", tc.spec, err)
		}
		if s != (cronspec.Schedule{}) {
			t.Errorf("Parse(%q) returned a non-zero Schedule with its error", tc.spec)
		}
	}
}

func TestLoadZone(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"", "UTC"} {
		if loc, err := cronspec.LoadZone(name); err != nil || loc != time.UTC {
			t.Errorf("LoadZone(%q) = %v, %v; want UTC", name, loc, err)
		}
	}
	for _, name := range []string{"Europe/Berlin", "America/New_York", "America/Argentina/Salta", "Etc/GMT+5", "Asia/Kolkata"} {
		loc, err := cronspec.LoadZone(name)
		if err != nil || loc.String() != name {
			t.Errorf("LoadZone(%q) = %v, %v", name, loc, err)
		}
		if again, _ := cronspec.LoadZone(name); again != loc {
			t.Errorf("LoadZone(%q) twice: different *Location", name)
		}
	}
	for _, tc := range []struct{ name, want string }{
		{"Mars/Olympus", `cronspec: unknown time zone "Mars/Olympus": want an IANA name like "Europe/Berlin"`},
		{"Local", `cronspec: time zone "Local" is not allowed: name an IANA zone like "Europe/Berlin", or "" for UTC`},
		{"Europe//Berlin", `cronspec: unknown time zone "Europe//Berlin": want an IANA name like "Europe/Berlin"`},
		{"Europe/./Berlin", `cronspec: unknown time zone "Europe/./Berlin": want an IANA name like "Europe/Berlin"`},
		{"../etc/passwd", `cronspec: unknown time zone "../etc/passwd": want an IANA name like "Europe/Berlin"`},
		{"/usr/share/zoneinfo/UTC", `cronspec: unknown time zone "/usr/share/zoneinfo/UTC": want an IANA name like "Europe/Berlin"`},
		{" Europe/Berlin", `cronspec: unknown time zone " Europe/Berlin": want an IANA name like "Europe/Berlin"`},
		{"+01:00", `cronspec: unknown time zone "+01:00": want an IANA name like "Europe/Berlin"`},
		// Files of the system's zoneinfo that Go's embedded copy has not: a
		// worker without that directory (the container image) could not load
		// them.
		{"posix/Europe/Berlin", `cronspec: unknown time zone "posix/Europe/Berlin": want an IANA name like "Europe/Berlin"`},
		{"right/UTC", `cronspec: unknown time zone "right/UTC": want an IANA name like "Europe/Berlin"`},
		{"localtime", `cronspec: unknown time zone "localtime": want an IANA name like "Europe/Berlin"`},
		{"posixrules", `cronspec: unknown time zone "posixrules": want an IANA name like "Europe/Berlin"`},
		{"europe/berlin", `cronspec: unknown time zone "europe/berlin": want an IANA name like "Europe/Berlin"`},
		{"Europe/Berlin\x00", "cronspec: unknown time zone \"Europe/Berlin\\x00\": want an IANA name like \"Europe/Berlin\""},
		{"Europe/Berlin\n", `cronspec: unknown time zone "Europe/Berlin\n": want an IANA name like "Europe/Berlin"`},
	} {
		loc, err := cronspec.LoadZone(tc.name)
		if err == nil {
			t.Errorf("LoadZone(%q) = %v, want error", tc.name, loc)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("LoadZone(%q) error:\n got  %s\n want %s", tc.name, err, tc.want)
		}
		if !errors.Is(err, cronspec.ErrInvalid) {
			t.Errorf("LoadZone(%q) error %v does not wrap ErrInvalid", tc.name, err)
		}
		if !strings.Contains(err.Error(), "time zone") {
			t.Errorf("LoadZone(%q) error %v does not say it is about the time zone", tc.name, err)
		}
	}
}

// TestZonesMatchToolchain: the names LoadZone accepts are exactly those of
// the time zone database this Go release embeds (time/tzdata is built from
// lib/time/zoneinfo.zip), and each loads. After a Go upgrade that changes
// them: go generate ./internal/cronspec (it rewrites the SQL side too).
func TestZonesMatchToolchain(t *testing.T) {
	t.Parallel()
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	zr, err := zip.OpenReader(filepath.Join(strings.TrimSpace(string(goroot)), "lib", "time", "zoneinfo.zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var embedded []string
	for _, f := range zr.File {
		if !strings.HasSuffix(f.Name, "/") {
			embedded = append(embedded, f.Name)
		}
	}
	slices.Sort(embedded)
	if !slices.Equal(embedded, cronspec.ZoneNames) {
		t.Fatalf("zones.go lists %d names, this Go release embeds %d others: run go generate ./internal/cronspec",
			len(cronspec.ZoneNames), len(embedded))
	}
	for _, name := range cronspec.ZoneNames {
		if _, err := cronspec.LoadZone(name); err != nil {
			t.Errorf("LoadZone(%q): %v", name, err)
		}
	}
	for _, name := range []string{"Etc/GMT+5", "Factory", "Europe/Berlin"} {
		if _, err := cronspec.LoadZone(name); err != nil {
			t.Errorf("LoadZone(%q): %v", name, err)
		}
	}
}

func BenchmarkNext(b *testing.B) {
	ny := mustZone(b, "America/New_York")
	from := mustTime(b, "2026-01-01T00:00:00Z")
	for _, bc := range []struct {
		name, spec string
		loc        *time.Location
	}{
		{"leap day", "0 0 29 2 *", time.UTC},
		{"leap day on Sunday", "0 0 29 2 */7", time.UTC},
		{"never", "0 0 30 2 *", time.UTC},
		{"quarter-hourly NY", "*/15 * * * *", ny},
		{"daily NY", "30 2 * * *", ny},
		{"every 90m", "@every 90m", ny},
	} {
		s, err := cronspec.Parse(bc.spec)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				s.Next(from, bc.loc)
			}
		})
	}
}
