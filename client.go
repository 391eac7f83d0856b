package pgsched

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgsched/pgsched/internal/metrics"
	"github.com/pgsched/pgsched/internal/partition"
	"github.com/pgsched/pgsched/internal/store"
)

// Errors returned by the client and the SQL API. Use errors.Is.
var (
	// ErrInvalidTask: a field is missing, too long, not UTF-8 or outside
	// its range, the kind has a control character, or the payload is not
	// JSON, over the size limit or nested too deeply. The message names the
	// field.
	ErrInvalidTask = store.ErrInvalid
	// ErrInPast: scheduled_at is earlier than now minus the grace window.
	ErrInPast = store.ErrInPast
	// ErrTaskRunning: the key is running right now and cannot be changed.
	ErrTaskRunning = store.ErrRunning
	// ErrNotFound: no pending task has that key (Cancel, Reschedule).
	ErrNotFound = store.ErrNotFound
	// ErrKeyExists: Reschedule's new key is already taken or completed.
	ErrKeyExists = store.ErrConflict
)

// Result says what enqueueing did.
type Result string

// The results of Schedule.
const (
	Inserted         Result = "inserted"
	Updated          Result = "updated"
	AlreadyCompleted Result = "already_completed"
)

// Task is a unit of work to run at ScheduledAt.
type Task struct {
	// OrderingID groups tasks that must run one at a time, in order.
	// Required, 1..255 bytes of UTF-8.
	OrderingID string
	// ScheduledAt is when to run. Kept to the microsecond. Years 1 to 9999
	// (UTC).
	ScheduledAt time.Time
	// UniquenessKey tells apart tasks with the same OrderingID and time.
	// Defaults to "".
	UniquenessKey string
	// Kind selects the handler. Defaults to "default". At most 255 bytes,
	// no control characters (it becomes an HTTP header and a metric label).
	Kind string
	// Payload is any JSON value. Defaults to {}. Arrays and objects nest at
	// most MaxPayloadDepth levels; its size as stored jsonb is at most the
	// installation's max_payload_bytes (1 MiB by default).
	Payload json.RawMessage
}

// Key identifies a task.
type Key struct {
	OrderingID    string
	ScheduledAt   time.Time
	UniquenessKey string
}

// Key returns the task's key.
func (t Task) Key() Key {
	return Key{OrderingID: t.OrderingID, ScheduledAt: t.ScheduledAt, UniquenessKey: t.UniquenessKey}
}

// Client enqueues, cancels and reschedules tasks.
type Client struct {
	pool      *pgxpool.Pool
	store     store.Store
	scheduled *prometheus.CounterVec
	tracer    Tracer
	// skipNewKeys counts batches still to send without the new-keys
	// promise after one was refused (see scheduleMany).
	skipNewKeys atomic.Int32
}

// A batch of at least newKeysMin tasks sent outside the caller's
// transaction first promises that none of its ordering_ids has a task yet:
// the database then writes their heads with a plain INSERT (a third
// cheaper than finding and locking existing ones) and refuses the batch,
// writing nothing, if the promise was wrong; the client then sends it the
// general way, and the next newKeysBackoff batches too, so a producer that
// feeds existing ordering_ids pays the second round trip once per
// newKeysBackoff+1 batches. Below newKeysMin the round trip a refusal
// costs outweighs what the cheaper insert saves.
const (
	newKeysMin     = 100
	newKeysBackoff = 16
)

// NewClient returns a client on pool.
func NewClient(pool *pgxpool.Pool, cfg ClientConfig) (*Client, error) {
	if pool == nil {
		return nil, errors.New("pgsched: NewClient needs a pool")
	}
	st, err := store.New(cfg.Schema)
	if err != nil {
		return nil, fmt.Errorf("pgsched: %w", err)
	}
	scheduled, err := metrics.Scheduled(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("pgsched: registering metrics: %w", err)
	}
	return &Client{pool: pool, store: st, scheduled: scheduled, tracer: cfg.Tracer}, nil
}

// count records committed enqueues (ScheduleTx's are not: the caller's
// transaction may still roll back).
func (c *Client) count(results ...Result) {
	for _, r := range results {
		c.scheduled.WithLabelValues(string(r)).Inc()
	}
}

// Schedule enqueues one task.
func (c *Client) Schedule(ctx context.Context, t Task) (Result, error) {
	r, err := c.scheduleOne(ctx, c.pool, t)
	if err == nil {
		c.count(r)
	}
	return r, err
}

// ScheduleTx enqueues one task inside the caller's transaction: the task
// exists only if that transaction commits.
func (c *Client) ScheduleTx(ctx context.Context, tx pgx.Tx, t Task) (Result, error) {
	return c.scheduleOne(ctx, tx, t)
}

// ScheduleMany enqueues tasks atomically in one round trip: either every task
// is stored (or found completed) or, on any error, none is. Results line up
// with tasks.
func (c *Client) ScheduleMany(ctx context.Context, tasks []Task) ([]Result, error) {
	rs, err := c.scheduleMany(ctx, c.pool, tasks, true)
	if err == nil {
		c.count(rs...)
	}
	return rs, err
}

// ScheduleManyTx is ScheduleMany inside the caller's transaction.
func (c *Client) ScheduleManyTx(ctx context.Context, tx pgx.Tx, tasks []Task) ([]Result, error) {
	return c.scheduleMany(ctx, tx, tasks, false)
}

// Cancel removes a pending task. ErrTaskRunning if it runs now, ErrNotFound
// if there is no such pending task.
func (c *Client) Cancel(ctx context.Context, k Key) error {
	if err := validateKey(k, -1); err != nil {
		return err
	}
	if err := c.store.Cancel(ctx, c.pool, k.OrderingID, k.ScheduledAt, k.UniquenessKey); err != nil {
		return fmt.Errorf("pgsched: cancel: %w", err)
	}
	return nil
}

// Reschedule moves a pending task to newAt in one atomic step: a worker sees
// it either at its old time or at its new one, never both or neither.
func (c *Client) Reschedule(ctx context.Context, k Key, newAt time.Time) error {
	if err := validateKey(k, -1); err != nil {
		return err
	}
	if err := validateTime(-1, "new_scheduled_at", newAt); err != nil {
		return err
	}
	if err := c.store.Reschedule(ctx, c.pool, k.OrderingID, k.ScheduledAt, k.UniquenessKey, newAt); err != nil {
		return fmt.Errorf("pgsched: reschedule: %w", err)
	}
	return nil
}

// Partition returns the logical partition of orderingID among count
// partitions, exactly as the SQL function pgsched.partition_of computes it.
func Partition(orderingID string, count int) int { return partition.Of(orderingID, count) }

func (c *Client) scheduleOne(ctx context.Context, db store.DBTX, t Task) (Result, error) {
	res, err := c.scheduleMany(ctx, db, []Task{t}, false)
	if err != nil {
		return "", err
	}
	return res[0], nil
}

// scheduleMany enqueues tasks on db; own says db is not the caller's
// transaction, so a refused batch can be sent again.
func (c *Client) scheduleMany(ctx context.Context, db store.DBTX, tasks []Task, own bool) ([]Result, error) {
	if len(tasks) == 0 {
		return []Result{}, nil
	}
	var traceparent string
	if c.tracer != nil {
		// A Tracer is code, not input, but what it gives is stored: it gets
		// the SQL API's check, without the round trip.
		traceparent = c.tracer.Inject(ctx)
		if reason := traceparentProblem(traceparent); reason != "" {
			return nil, fieldError(-1, "traceparent", reason)
		}
	}
	batch := make([]store.NewTask, len(tasks))
	for i, t := range tasks {
		idx := i
		if len(tasks) == 1 {
			idx = -1
		}
		if err := validateTask(t, idx); err != nil {
			return nil, err
		}
		batch[i] = store.NewTask{
			OrderingID: t.OrderingID, ScheduledAt: t.ScheduledAt, UniquenessKey: t.UniquenessKey,
			Kind: t.Kind, Payload: t.Payload, Traceparent: traceparent,
		}
	}
	newKeys := false
	if own && len(batch) >= newKeysMin {
		if c.skipNewKeys.Load() > 0 {
			c.skipNewKeys.Add(-1)
		} else {
			newKeys = true
		}
	}
	words, err := c.store.ScheduleMany(ctx, db, batch, newKeys)
	if newKeys && errors.Is(err, store.ErrHasHead) {
		c.skipNewKeys.Store(newKeysBackoff)
		words, err = c.store.ScheduleMany(ctx, db, batch, false)
	}
	if err != nil {
		return nil, fmt.Errorf("pgsched: schedule: %w", err)
	}
	out := make([]Result, len(words))
	for i, w := range words {
		out[i] = Result(w)
	}
	return out, nil
}

// The supported range of scheduled_at: years 1 to 9999, UTC, refused
// outside it by the SQL API too, with the same message. A Go time past
// PostgreSQL's last year, 294276, would fail with an error naming no field
// or, further out, wrap pgx's microsecond count round to another date and
// be stored silently.
var (
	minScheduledAt = time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC)
	endScheduledAt = time.Date(10000, time.January, 1, 0, 0, 0, 0, time.UTC) // exclusive
)

const outOfRange = "is outside the supported range 0001-01-01 00:00:00 to 9999-12-31 23:59:59.999999 UTC"

// zeroTime is why the zero time.Time is refused. It is also the one
// instant of the supported range the SQL API refuses (pgsched.time_error),
// in these words, so a Go program that passes an unset time through its
// own SQL learns the same.
const zeroTime = "is required: 0001-01-01 00:00:00 UTC is Go's zero time, taken as unset"

// MaxPayloadDepth is how deeply a payload's arrays and objects may nest
// ({} is 1 level, [{}] 2). A webhook body nests the payload one level
// deeper, and serde_json, like several other decoders, refuses 128 levels
// by default: a deeper payload would be stored, then fail at every delivery.
const MaxPayloadDepth = 126

// validateTask checks what the SQL API cannot, or cannot name: PostgreSQL
// text cannot hold invalid UTF-8 or NUL bytes, a time beyond PostgreSQL's
// range does not survive encoding, and a payload that is not JSON, or that
// jsonb cannot hold, fails the whole statement without naming the field.
// The range of scheduled_at, a kind's control characters and the payload's
// depth are checked on both sides with the same message, so a Go caller
// learns of them without a round trip. Lengths, the in-the-past check and
// the payload size limit (of the stored jsonb, which only the server sees)
// are the SQL API's alone, identical for Go and psql users.
func validateTask(t Task, idx int) error {
	if err := validateKey(t.Key(), idx); err != nil {
		return err
	}
	if err := validateText(idx, "kind", t.Kind); err != nil {
		return err
	}
	for i := 0; i < len(t.Kind); i++ {
		if c := t.Kind[i]; c < 0x20 || c == 0x7f {
			return fieldError(idx, "kind", "contains a control character")
		}
	}
	if len(t.Payload) > 0 {
		if reason := payloadProblem(t.Payload); reason != "" {
			return fieldError(idx, "payload", reason)
		}
	}
	return nil
}

func validateKey(k Key, idx int) error {
	if k.OrderingID == "" {
		return fieldError(idx, "ordering_id", "is required")
	}
	if err := validateText(idx, "ordering_id", k.OrderingID); err != nil {
		return err
	}
	if err := validateText(idx, "uniqueness_key", k.UniquenessKey); err != nil {
		return err
	}
	return validateTime(idx, "scheduled_at", k.ScheduledAt)
}

func validateTime(idx int, field string, at time.Time) error {
	if at.IsZero() {
		return fieldError(idx, field, zeroTime)
	}
	if at.Before(minScheduledAt) || !at.Before(endScheduledAt) {
		return fieldError(idx, field, outOfRange)
	}
	return nil
}

func validateText(idx int, field, v string) error {
	if reason := textProblem(v); reason != "" {
		return fieldError(idx, field, reason)
	}
	return nil
}

// textProblem says why PostgreSQL refuses v as text at input, or "".
func textProblem(v string) string {
	if !utf8.ValidString(v) {
		return "is not valid UTF-8"
	}
	for i := 0; i < len(v); i++ {
		if v[i] == 0 {
			return "contains a NUL byte"
		}
	}
	return ""
}

// payloadProblem says why p cannot be stored as a jsonb payload, or "".
// Beyond JSON's own rules, jsonb refuses a \u0000 escape, an unpaired
// UTF-16 surrogate escape and a number outside PostgreSQL's numeric range;
// the depth limit is pgsched's. One pass over the bytes finds them, before
// json.Valid, which gives up on any payload nested 10000 levels deep.
func payloadProblem(p []byte) string {
	if !utf8.Valid(p) {
		return "is not valid UTF-8"
	}
	depth := 0
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '[' || c == '{':
			depth++
			if depth > MaxPayloadDepth {
				return fmt.Sprintf("is nested more than %d levels deep", MaxPayloadDepth)
			}
		case c == ']' || c == '}':
			depth--
		case c == '"':
			end, reason := scanString(p, i+1)
			if reason != "" {
				return reason
			}
			i = end
		case c == '-' || ('0' <= c && c <= '9'):
			end := i
			for end < len(p) && isNumberByte(p[end]) {
				end++
			}
			if !numericFits(p[i:end]) {
				return "has a number outside PostgreSQL's numeric range"
			}
			i = end - 1
		}
	}
	if !json.Valid(p) {
		return "is not valid JSON" + syntaxDetail(p)
	}
	return ""
}

// scanString checks the JSON string starting at p[i] (after its opening
// quote) and returns the index of its closing quote (len(p) if none).
func scanString(p []byte, i int) (int, string) {
	for ; i < len(p); i++ {
		switch p[i] {
		case '"':
			return i, ""
		case '\\':
			i++
			if i >= len(p) || p[i] != 'u' {
				continue
			}
			r, ok := hex4(p, i+1)
			if !ok {
				continue // not JSON: json.Valid says so
			}
			i += 4
			switch {
			case r == 0:
				return i, `has a \u0000 escape, which jsonb cannot store`
			case 0xD800 <= r && r < 0xDC00:
				if i+2 < len(p) && p[i+1] == '\\' && p[i+2] == 'u' {
					if lo, ok := hex4(p, i+3); ok && 0xDC00 <= lo && lo < 0xE000 {
						i += 6
						continue
					}
				}
				return i, "has an unpaired UTF-16 surrogate escape, which jsonb cannot store"
			case 0xDC00 <= r && r < 0xE000:
				return i, "has an unpaired UTF-16 surrogate escape, which jsonb cannot store"
			}
		}
	}
	return i, ""
}

func hex4(p []byte, i int) (rune, bool) {
	if i+4 > len(p) {
		return 0, false
	}
	var r rune
	for _, c := range p[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func isNumberByte(c byte) bool {
	return '0' <= c && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// numericFits reports whether PostgreSQL's numeric, which jsonb stores
// numbers as, can hold the JSON number num: at most 16383 digits after the
// decimal point (trailing zeros and a negative exponent count), its first
// significant digit at most 131071 places before it (numeric's int16
// weight counts groups of 4 digits), and an exponent under 2^30 even for
// zero (set_var_from_str in PostgreSQL's numeric.c). A token that is not a
// JSON number fits: json.Valid refuses it.
func numericFits(num []byte) bool {
	s := num
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	intEnd := 0
	for intEnd < len(s) && '0' <= s[intEnd] && s[intEnd] <= '9' {
		intEnd++
	}
	intPart, rest := s[:intEnd], s[intEnd:]
	var frac []byte
	if len(rest) > 0 && rest[0] == '.' {
		j := 1
		for j < len(rest) && '0' <= rest[j] && rest[j] <= '9' {
			j++
		}
		frac, rest = rest[1:j], rest[j:]
	}
	const expLimit = 1<<30 - 1 // INT_MAX / 2
	exp := int64(0)
	if len(rest) > 0 && (rest[0] == 'e' || rest[0] == 'E') {
		rest = rest[1:]
		neg := false
		if len(rest) > 0 && (rest[0] == '+' || rest[0] == '-') {
			neg = rest[0] == '-'
			rest = rest[1:]
		}
		if len(rest) == 0 {
			return true
		}
		for _, c := range rest {
			if c < '0' || c > '9' {
				return true
			}
			if exp = exp*10 + int64(c-'0'); exp >= expLimit {
				return false
			}
		}
		if neg {
			exp = -exp
		}
	} else if len(rest) > 0 || len(intPart) == 0 {
		return true
	}
	if int64(len(frac))-exp > 16383 {
		return false
	}
	first := -1
	for k, c := range intPart {
		if c != '0' {
			first = k
			break
		}
	}
	if first < 0 {
		for k, c := range frac {
			if c != '0' {
				first = len(intPart) + k
				break
			}
		}
	}
	if first < 0 {
		return true // zero
	}
	weight := int64(len(intPart)-1-first) + exp // of the first significant digit
	return weight <= 131071
}

func fieldError(idx int, field, reason string) error {
	if idx >= 0 {
		return fmt.Errorf("pgsched: %w: %s %s (batch item %d)", ErrInvalidTask, field, reason, idx+1)
	}
	return fmt.Errorf("pgsched: %w: %s %s", ErrInvalidTask, field, reason)
}
