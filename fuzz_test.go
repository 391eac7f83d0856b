package pgsched

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pgsched/pgsched/internal/pgtest"
)

// fuzzSeeds are the tricky inputs: each is (ordering_id, uniqueness_key,
// kind, payload, scheduled_at in Unix microseconds).
func fuzzSeeds(f *testing.F) {
	future := time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for _, s := range []struct {
		o, uk, kind, payload string
		at                   int64
	}{
		{"o", "", "", "", future},
		{"o", "u", "email.send", `{"n":1}`, future + 1},
		{"", "", "", "", future},
		{strings.Repeat("x", 255), strings.Repeat("é", 127), strings.Repeat("k", 255), `[]`, future},
		{strings.Repeat("x", 256), "", "", "", future},
		{"a\xffb", "\xc3\x28", "k\x00", "", future},
		{"o", "", "k\tx", "", future},
		{"o", "", "k\x7f", "", future},
		{"o", "", "", `{nope`, future},
		{"o", "", "", "\"\xff\"", future},
		{"o", "", "", `"\u0000"`, future},
		{"o", "", "", `"\\u0000"`, future},
		{"o", "", "", `["\ud800"]`, future},
		{"o", "", "", `["\ud83d\ude00"]`, future},
		{"o", "", "", `[1e131071, 1e131072]`, future},
		{"o", "", "", `[0e-16384]`, future},
		{"o", "", "", `[-0, 1.50, 1E+2]`, future},
		{"o", "", "", `{"a":1,"a":2}`, future},
		{"o", "", "", "  \t\n{}\n", future},
		{"o", "", "", "  ", future},
		{"o", "", "", "null", future},
		{"o", "", "", strings.Repeat("[", 126) + strings.Repeat("]", 126), future},
		{"o", "", "", strings.Repeat("[", 127) + strings.Repeat("]", 127), future},
		{"o", "", "", strings.Repeat(`{"":`, 126) + "1" + strings.Repeat("}", 126), future},
		{"o", "", "", `"` + strings.Repeat("a", 5000) + `"`, future},
		{"o", "", "", "", 0},
		{"o", "", "", "", -62135596800000000},     // 0001-01-01: time.Time{}, required
		{"o", "", "", "", -62135596800000000 + 1}, // year 1, in the past
		{"o", "", "", "", -62135596800000000 - 1}, // year 0
		{"o", "", "", "", 253402300799999999},     // 9999-12-31 23:59:59.999999
		{"o", "", "", "", 253402300800000000},     // 10000-01-01
		{"o", "", "", "", 1 << 62},                // year 148,000 or so
		{"o", "", "", "", 1<<63 - 1},
		{"o", "", "", "", -1 << 63},
	} {
		f.Add(s.o, s.uk, s.kind, []byte(s.payload), s.at)
	}
}

// FuzzValidateTask: validateTask never panics, refuses only with
// ErrInvalidTask, and what it lets through is UTF-8 without NUL, in the
// time range, and JSON no deeper than MaxPayloadDepth.
func FuzzValidateTask(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, o, uk, kind string, payload []byte, micros int64) {
		task := Task{OrderingID: o, ScheduledAt: time.UnixMicro(micros), UniquenessKey: uk, Kind: kind, Payload: payload}
		for _, idx := range []int{-1, 3} {
			err := validateTask(task, idx)
			if err != nil {
				if !errors.Is(err, ErrInvalidTask) && !errors.Is(err, ErrInPast) {
					t.Fatalf("validateTask: %v is neither ErrInvalidTask nor ErrInPast", err)
				}
				continue
			}
			for _, s := range []string{o, uk, kind} {
				if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
					t.Fatalf("validateTask let %q through", s)
				}
			}
			if o == "" || task.ScheduledAt.Before(minScheduledAt) || !task.ScheduledAt.Before(endScheduledAt) {
				t.Fatalf("validateTask let %+v through", task)
			}
			if len(payload) > 0 && (!json.Valid(payload) || jsonDepth(payload) > MaxPayloadDepth) {
				t.Fatalf("validateTask let payload %q through", payload)
			}
		}
	})
}

// jsonDepth is how deeply the valid JSON document doc nests, by decoding it.
func jsonDepth(doc []byte) int {
	d := json.NewDecoder(bytes.NewReader(doc))
	depth, deepest := 0, 0
	for {
		tok, err := d.Token()
		if err != nil {
			return deepest
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
			deepest = max(deepest, depth)
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
	}
}

// FuzzSchedule enqueues each input on a real database: no panic; an error
// wraps a public sentinel and leaves no task with that key; a success
// stores exactly what was given.
func FuzzSchedule(f *testing.F) {
	fuzzSeeds(f)
	db := pgtest.NewSchema(f, pgtest.SchemaOptions{MaxConns: 4})
	c, err := NewClient(db.Pool, ClientConfig{Schema: db.Schema})
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	sentinels := []error{ErrInvalidTask, ErrInPast, ErrTaskRunning, ErrNotFound, ErrKeyExists}
	f.Fuzz(func(t *testing.T, o, uk, kind string, payload []byte, micros int64) {
		at := time.UnixMicro(micros)
		task := Task{OrderingID: o, ScheduledAt: at, UniquenessKey: uk, Kind: kind, Payload: payload}
		res, err := c.Schedule(ctx, task)
		// A key PostgreSQL can hold is looked up; others cannot be stored.
		storable := utf8.ValidString(o) && utf8.ValidString(uk) && !strings.ContainsRune(o, 0) && !strings.ContainsRune(uk, 0) &&
			!at.Before(minScheduledAt) && at.Before(endScheduledAt)
		type row struct {
			o, uk, kind string
			at          time.Time
			payload     []byte
		}
		var rows []row
		if storable {
			r, qerr := db.Pool.Query(ctx, "SELECT ordering_id, scheduled_at, uniqueness_key, kind, payload::text FROM "+db.Schema+
				".tasks WHERE ordering_id = $1", o)
			if qerr != nil {
				t.Fatal(qerr)
			}
			for r.Next() {
				var x row
				if err := r.Scan(&x.o, &x.at, &x.uk, &x.kind, &x.payload); err != nil {
					t.Fatal(err)
				}
				rows = append(rows, x)
			}
			if r.Err() != nil {
				t.Fatal(r.Err())
			}
			// Leave the next input an empty schema.
			for _, table := range []string{"heads", "backlog"} {
				if _, err := db.Pool.Exec(ctx, "DELETE FROM "+db.Schema+"."+table+" WHERE ordering_id = $1", o); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err != nil {
			wrapped := false
			for _, s := range sentinels {
				wrapped = wrapped || errors.Is(err, s)
			}
			if !wrapped {
				t.Fatalf("Schedule(%+v): %v wraps no public sentinel", task, err)
			}
			if len(rows) > 0 {
				t.Fatalf("Schedule(%+v) failed (%v) but stored %+v", task, err, rows)
			}
			return
		}
		if res != Inserted {
			t.Fatalf("Schedule(%+v) = %q, want inserted", task, res)
		}
		if !storable || len(rows) != 1 {
			t.Fatalf("Schedule(%+v) succeeded; stored rows %+v", task, rows)
		}
		got := rows[0]
		wantKind := kind
		if wantKind == "" {
			wantKind = "default"
		}
		if got.o != o || got.uk != uk || got.kind != wantKind || !got.at.Equal(at) {
			t.Fatalf("stored %+v for %+v", got, task)
		}
		wantPayload := payload
		if len(payload) == 0 {
			wantPayload = []byte("{}")
		}
		if !jsonEqual(t, wantPayload, got.payload) {
			t.Fatalf("payload %q stored as %q", wantPayload, got.payload)
		}
	})
}

// jsonEqual compares two JSON documents as values, numbers exactly.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	return reflect.DeepEqual(decodeExact(t, a), decodeExact(t, b))
}

func decodeExact(t *testing.T, doc []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decoding %q: %v", doc, err)
	}
	return exactNumbers(v)
}

// exactNumbers turns json.Numbers into exact rationals, so 1E+2 equals 100.
func exactNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		r, ok := new(big.Rat).SetString(string(x))
		if !ok {
			return string(x)
		}
		return r.RatString()
	case []any:
		for i := range x {
			x[i] = exactNumbers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = exactNumbers(x[k])
		}
	}
	return v
}
