package cronspec

import (
	"math"
	"math/bits"
	"time"
)

// searchYears bounds the search of Next. The Gregorian calendar, weekdays
// included, repeats every 400 years, so a date that does not occur within
// 400 years never occurs.
const searchYears = 400

// lookaround is more than any UTC offset: instants further than this from
// a local time cannot show it on the zone's clock.
const lookaround = 48 * 3600

// Next returns the first tick of the schedule strictly after after, in
// loc (UTC when loc is nil). Cron fields are read on loc's wall clock with
// the daylight-saving rule of the package documentation; @every ignores
// loc except for the location of the result. Next returns the zero Time
// when there is no tick: the schedule names a date that never exists
// ("0 0 30 2 *"), or it is the zero Schedule.
func (s Schedule) Next(after time.Time, loc *time.Location) time.Time {
	if loc == nil {
		loc = time.UTC
	}
	// Ticks fall on whole seconds, and an instant t is strictly after
	// after exactly when it is strictly after a.
	a := after.Unix()
	if s.every > 0 {
		k := a / s.every
		if a%s.every != 0 && a < 0 {
			k-- // floor
		}
		if k >= math.MaxInt64/s.every {
			return time.Time{}
		}
		return time.Unix((k+1)*s.every, 0).In(loc)
	}
	if !s.possible() {
		return time.Time{}
	}
	// The first local time whose first instant is after a. It is the
	// local time just after a, except inside the second pass of a
	// repeated hour, whose local times first showed before a.
	c := civilOf(wallHigh(a, loc) + 1)
	limit := c.year + searchYears
	for range 1000 {
		var ok bool
		if c, ok = s.nextWall(c, limit); !ok {
			return time.Time{}
		}
		if t := firstReach(c.unix(), loc); t > a {
			return time.Unix(t, 0).In(loc)
		}
		// Not reached with real zone data; step on rather than loop.
		c = civilOf(c.unix() + 1)
	}
	return time.Time{}
}

// possible reports whether some date matches the day and month fields. It
// is exact: each day of the year, 29 February included, falls on every day
// of the week within 400 years.
func (s Schedule) possible() bool {
	for _, f := range s.fields {
		if f.bits == 0 {
			return false
		}
	}
	dom, dow := s.fields[fDom], s.fields[fDow]
	if dom.star == 0 && dow.star == 0 {
		return true // either day field may match, and every month has every weekday
	}
	for m := 1; m <= 12; m++ {
		if s.fields[fMonth].bits&(1<<m) != 0 && dom.bits&(1<<(daysIn(2000, m)+1)-1) != 0 {
			return true
		}
	}
	return false
}

// zoneAt returns the UTC offset of loc at the instant u (Unix seconds) and
// an instant after u up to which that offset holds (math.MaxInt64 if it
// always does).
func zoneAt(u int64, loc *time.Location) (off, end int64) {
	t := time.Unix(u, 0).In(loc)
	off = offsetAt(u, loc)
	_, e := t.ZoneBounds()
	if e.IsZero() {
		return off, math.MaxInt64
	}
	if end = e.Unix(); end > u {
		return off, end
	}
	// ZoneBounds can return an end before t: for the years after a zone's
	// last listed transition, Go ends the last zone of a leap year a day
	// early (https://github.com/golang/go/issues/81583). The offset itself
	// is right, so look for the change hour by hour, and for the second by
	// bisection.
	lo, hi := u, u+3600
	for offsetAt(hi, loc) == off {
		if hi-u >= lookaround {
			return off, hi
		}
		lo, hi = hi, hi+3600
	}
	for hi-lo > 1 {
		if mid := lo + (hi-lo)/2; offsetAt(mid, loc) == off {
			lo = mid
		} else {
			hi = mid
		}
	}
	return off, hi
}

func offsetAt(u int64, loc *time.Location) int64 {
	_, off := time.Unix(u, 0).In(loc).Zone()
	return int64(off)
}

// firstReach returns the first instant (Unix seconds) at which loc's clock
// shows the local time w (seconds since 1970-01-01 00:00 local) or later:
// w itself when it occurs once, its first occurrence when it occurs twice,
// and the end of the gap when clocks skip it.
func firstReach(w int64, loc *time.Location) int64 {
	u := w - lookaround // the clock shows less than w here
	for range 64 {
		off, end := zoneAt(u, loc)
		// Within one zone the clock shows instant+off, which reaches w
		// at w-off.
		if t := max(u, w-off); t < end {
			return t
		}
		if end <= u {
			break
		}
		u = end
	}
	return w // not reached with real zone data
}

// wallHigh returns the latest local time (seconds since 1970-01-01 00:00
// local, rounded down) that loc's clock has shown at or before the instant
// a. It is the local time of a, or later when a is in the second pass of a
// local hour that is repeated.
func wallHigh(a int64, loc *time.Location) int64 {
	u := a - lookaround
	high := int64(math.MinInt64)
	for range 64 {
		off, end := zoneAt(u, loc)
		if end > a {
			return max(high, a+off)
		}
		high = max(high, end-1+off) // the last second of that zone
		if end <= u {
			break
		}
		u = end
	}
	off, _ := zoneAt(a, loc)
	return a + off // not reached with real zone data
}

// civil is a local date and time.
type civil struct {
	year                             int
	month, day, hour, minute, second int
}

func civilOf(w int64) civil {
	t := time.Unix(w, 0).UTC()
	return civil{t.Year(), int(t.Month()), t.Day(), t.Hour(), t.Minute(), t.Second()}
}

func (c civil) unix() int64 {
	return time.Date(c.year, time.Month(c.month), c.day, c.hour, c.minute, c.second, 0, time.UTC).Unix()
}

func (c civil) nextMonth() civil {
	if c.month == 12 {
		return civil{year: c.year + 1, month: 1, day: 1}
	}
	return civil{year: c.year, month: c.month + 1, day: 1}
}

func (c civil) nextDay() civil {
	if c.day >= daysIn(c.year, c.month) {
		return c.nextMonth()
	}
	return civil{year: c.year, month: c.month, day: c.day + 1}
}

func (c civil) nextHour() civil {
	if c.hour == 23 {
		return c.nextDay()
	}
	return civil{year: c.year, month: c.month, day: c.day, hour: c.hour + 1}
}

func (c civil) nextMinute() civil {
	if c.minute == 59 {
		return c.nextHour()
	}
	c.minute, c.second = c.minute+1, 0
	return c
}

// nextWall returns the first local time at or after c that matches the
// cron fields, or false when there is none before the year limit ends.
// It moves field by field, largest first: a month that does not match is
// skipped whole, and so on down to the second.
func (s Schedule) nextWall(c civil, limit int) (civil, bool) {
	for c.year <= limit {
		m, ok := nextBit(s.fields[fMonth].bits, c.month)
		if !ok {
			c = civil{year: c.year + 1, month: 1, day: 1}
			continue
		}
		if m != c.month {
			c = civil{year: c.year, month: m, day: 1}
		}
		d, dim := c.day, daysIn(c.year, c.month)
		for d <= dim && !s.dayMatches(c.year, c.month, d) {
			d++
		}
		if d > dim {
			c = c.nextMonth()
			continue
		}
		if d != c.day {
			c = civil{year: c.year, month: c.month, day: d}
		}
		h, ok := nextBit(s.fields[fHour].bits, c.hour)
		if !ok {
			c = c.nextDay()
			continue
		}
		if h != c.hour {
			c.hour, c.minute, c.second = h, 0, 0
		}
		mi, ok := nextBit(s.fields[fMinute].bits, c.minute)
		if !ok {
			c = c.nextHour()
			continue
		}
		if mi != c.minute {
			c.minute, c.second = mi, 0
		}
		sec, ok := nextBit(s.fields[fSecond].bits, c.second)
		if !ok {
			c = c.nextMinute()
			continue
		}
		c.second = sec
		return c, true
	}
	return civil{}, false
}

// dayMatches applies the Vixie cron rule: a day matches when either day
// field matches if both are restricted, and when both match otherwise.
func (s Schedule) dayMatches(y, m, d int) bool {
	dom, dow := s.fields[fDom], s.fields[fDow]
	domOK := dom.bits&(1<<d) != 0
	if dow.star == 1 {
		return domOK
	}
	wd := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC).Weekday()
	dowOK := dow.bits&(1<<wd) != 0
	if dom.star != 0 || dow.star != 0 {
		return domOK && dowOK
	}
	return domOK || dowOK
}

// nextBit returns the smallest set bit of b at or above from.
func nextBit(b uint64, from int) (int, bool) {
	b = b >> from << from
	if b == 0 {
		return 0, false
	}
	return bits.TrailingZeros64(b), true
}

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
