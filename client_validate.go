package pgsched

import (
	"time"

	"github.com/pgsched/pgsched/internal/jsonb"
)

// The range of timestamptz: a time outside it cannot reach PostgreSQL
// (pgx fails naming no field or, further out, wraps it round to another
// date), so a filter holding one is refused here rather than selecting
// the wrong dead tasks.
var (
	pgMinTime = time.Date(-4712, time.November, 24, 0, 0, 0, 0, time.UTC) // 4713 BC
	pgEndTime = time.Date(294277, time.January, 1, 0, 0, 0, 0, time.UTC)  // exclusive
)

const outsidePostgres = "is outside PostgreSQL's range 4713-11-24 BC to 294276-12-31 UTC"

// check refuses what the SQL API cannot receive at all, naming the field
// as pgsched.dead_ids names its parameters: text PostgreSQL refuses at
// input (NUL bytes, invalid UTF-8), and times beyond its range.
func (f DeadFilter) check() error {
	if err := validateText(-1, "kind", f.Kind); err != nil {
		return err
	}
	if err := validateText(-1, "ordering_id", f.OrderingID); err != nil {
		return err
	}
	for _, t := range []struct {
		field string
		at    time.Time
	}{{"died_after", f.DiedAfter}, {"died_before", f.DiedBefore}} {
		if !t.at.IsZero() && (t.at.Before(pgMinTime) || !t.at.Before(pgEndTime)) {
			return fieldError(-1, t.field, outsidePostgres)
		}
	}
	return nil
}

// inputProblem says, naming the field, what in r the database would
// refuse before recurring_upsert could name it (NUL bytes and invalid
// UTF-8 in text, a payload jsonb cannot hold), or what it names itself
// that Check can say without a round trip (a kind's control characters, in
// its words); "" when there is none. The payload's depth is refused too:
// every tick of a payload nested deeper than MaxPayloadDepth would be.
func (r Recurring) inputProblem() string {
	for _, f := range []struct{ field, v string }{
		{"name", r.Name}, {"spec", r.Spec}, {"time_zone", r.TimeZone}, {"kind", r.Kind}, {"missed", r.Missed},
	} {
		if reason := textProblem(f.v); reason != "" {
			return f.field + " " + reason
		}
	}
	if hasControl(r.Kind) {
		return "kind contains a control character"
	}
	if len(r.Payload) > 0 {
		if reason := jsonb.Problem(r.Payload, MaxPayloadDepth); reason != "" {
			return "payload " + reason
		}
	}
	return ""
}
