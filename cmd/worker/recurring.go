package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/pgsched/pgsched"
)

// recurringEntry is one schedule in the -recurring-file, as JSON:
//
//	[{"name": "nightly-report", "spec": "30 2 * * *", "time_zone": "Europe/Berlin",
//	  "kind": "report", "payload": {"format": "pdf"}, "missed": "one"}]
type recurringEntry struct {
	Name     string          `json:"name"`
	Spec     string          `json:"spec"`
	TimeZone string          `json:"time_zone"`
	Kind     string          `json:"kind"`
	Payload  json.RawMessage `json:"payload"`
	Missed   string          `json:"missed"`
}

// loadRecurring reads the schedules the worker creates or updates at start
// from path ("" for none). An unknown field, a bad entry or a name given
// twice is an error naming the entry, so a typo stops the worker instead of
// leaving a schedule out.
func loadRecurring(path string) ([]pgsched.Recurring, error) {
	if path == "" {
		return nil, nil
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("PGSCHED_RECURRING_FILE (-recurring-file) %s: %s", path, fmt.Sprintf(format, args...))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fail("%v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var entries []recurringEntry
	if err := dec.Decode(&entries); err != nil {
		return nil, fail("want a JSON array of schedules: %v", err)
	}
	seen := map[string]bool{}
	out := make([]pgsched.Recurring, len(entries))
	for i, e := range entries {
		r := pgsched.Recurring{Name: e.Name, Spec: e.Spec, TimeZone: e.TimeZone, Kind: e.Kind, Payload: e.Payload, Missed: e.Missed}
		if err := r.Check(); err != nil {
			return nil, fail("entry %d: %v", i+1, err)
		}
		if seen[e.Name] {
			return nil, fail("entry %d: name %q given twice", i+1, e.Name)
		}
		seen[e.Name] = true
		out[i] = r
	}
	return out, nil
}
