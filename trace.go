package pgsched

import "github.com/pgsched/pgsched/pgschedtype"

// Tracer connects pgsched to a tracing system (see pgschedtype.Tracer):
// set in ClientConfig, the trace context of each enqueueing call's ctx is
// stored with its tasks; set in WorkerConfig, each handler runs in a span
// linked to it, and claims and outcome batches get spans of their own.
// The module github.com/pgsched/pgsched/pgschedotel implements it with
// OpenTelemetry, so this module depends on no tracing library. Nil, the
// default, traces nothing and costs nothing. See docs/tracing.md.
type Tracer = pgschedtype.Tracer

// traceparentProblem says why tp is not a traceparent schedule_many
// stores, in the SQL API's words (pgsched.schedule_check), or "": a W3C
// trace context of version 00, lowercase hex, trace and span ids not all
// zero. "" is none, and fine.
func traceparentProblem(tp string) string {
	const bad = "is not a W3C trace context: want 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>, lowercase, ids not all zero"
	if tp == "" {
		return ""
	}
	if len(tp) != 55 || tp[:3] != "00-" || tp[35] != '-' || tp[52] != '-' {
		return bad
	}
	for _, f := range []string{tp[3:35], tp[36:52], tp[53:]} {
		zero := true
		for i := 0; i < len(f); i++ {
			c := f[i]
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return bad
			}
			zero = zero && c == '0'
		}
		if zero && len(f) > 2 {
			return bad
		}
	}
	return ""
}
