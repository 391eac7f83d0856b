// Package cronspec parses the schedule specs of recurring tasks and computes
// their ticks: [Parse] turns a spec into a [Schedule], [LoadZone] checks a
// time zone name, and [Schedule.Next] returns the first tick after a given
// instant.
//
// # Spec forms
//
//	30 2 * * *          five cron fields: minute hour day-of-month month day-of-week
//	15 30 2 * * *       six cron fields: a seconds field comes first
//	@hourly             0 * * * *
//	@daily, @midnight   0 0 * * *
//	@weekly             0 0 * * 0
//	@monthly            0 0 1 * *
//	@yearly, @annually  0 0 1 1 *
//	@every 1h30m        a fixed interval; see below
//
// Fields are separated by spaces or tabs. The shorthand names are
// case-insensitive.
//
// # Field syntax
//
//	field          values
//	second         0-59
//	minute         0-59
//	hour           0-23
//	day-of-month   1-31
//	month          1-12 or JAN-DEC
//	day-of-week    0-7 or SUN-SAT (0 and 7 are both Sunday)
//
// A field is "*" (every value), "*/n" (every n-th value from the first), or
// a comma-separated list of items, each of them a value "a", a range "a-b",
// a stepped range "a-b/n" or "a/n" (from a to the field's last value, in
// steps of n). Names are case-insensitive and may appear in ranges
// (MON-FRI). A range runs upwards: "FRI-MON" and "22-2" are errors. "*"
// stands alone: "*,5" is an error. The Quartz extensions L, W, # and ? are
// not supported and are reported as errors.
//
// # Day of month and day of week
//
// The two day fields follow classic Vixie cron. If both are restricted
// (neither starts with "*"), a day matches when either field matches:
// "0 0 13 * FRI" runs on every 13th and on every Friday. Otherwise a day
// must match both: "0 0 * * FRI" runs on Fridays only, and "0 0 */2 * FRI"
// on the Fridays that fall on an odd day of the month.
//
// # Time zones and daylight saving
//
// Cron fields are local wall-clock times in the time zone passed to Next
// (UTC when nil). Zone names are IANA names such as "Europe/Berlin", and
// [LoadZone] resolves them from the system's zoneinfo or, where that is
// missing, from the copy of the time zone database embedded in the binary,
// so a container without zoneinfo files works.
//
// Each matching local time runs once, at the first instant the zone's clock
// reads that time or later:
//
//   - When clocks go back and a local time occurs twice, it runs at its first
//     occurrence only, and the repeated local times do not run again. In
//     America/New_York on 2026-11-01 (01:00-01:59 happens twice) "30 1 * * *"
//     runs at 01:30 EDT, "0 * * * *" runs at 01:00 EDT and next at 02:00 EST,
//     and "*/15 * * * *" runs at 01:45 EDT and next at 02:00 EST.
//   - When clocks go forward and a local time does not exist, it runs at the
//     first instant after the gap, and ticks that land on the same instant run
//     once. In Europe/Berlin on 2026-03-29 (02:00-02:59 does not exist)
//     "30 2 * * *" runs at 03:00 CEST, and "*/15 * * * *" runs at 01:45 CET,
//     03:00 CEST and 03:15 CEST. Times that exist are never skipped.
//
// @every ignores time zones and daylight saving: see below.
//
// # @every
//
// "@every d" takes a Go duration (90s, 15m, 1h30m) that is a whole number of
// seconds and at least 1s. Its ticks are aligned to the Unix epoch in absolute
// time: tick k is 1970-01-01T00:00:00Z + k*d. The ticks do not depend on
// when the schedule was created or on the time zone, so every node computes
// the same ticks without shared state. "@every 1h" ticks on the hour in UTC,
// which is on the half hour in a zone like Asia/Kolkata.
//
// # Searching
//
// Next skips from field to field (month, day, hour, minute, second) rather
// than stepping through every minute: a month that does not match costs
// one step, so a rare spec like "0 0 29 2 *" finds 29 February eight years
// ahead (across 2100, which is not a leap year) in a few hundred steps.
// The Gregorian calendar repeats every 400 years, so Next returns the zero
// Time exactly when the spec names a date that never exists, such as
// "0 0 30 2 *".
//
// # Why our own
//
// Cron libraries differ in the places that matter to a scheduler: what
// happens to a local time that a daylight-saving change skips or repeats,
// how the two day fields combine, how far ahead they search, and whether an
// interval depends on when it was created. This package is small, states
// one rule for each of these, tests the rule against both transitions in
// two zones and against a brute-force reference, and adds no dependency.
package cronspec
