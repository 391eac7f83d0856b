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

	"github.com/pgsched/pgsched/internal/jsonb"
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
	// Priority orders due tasks: a claim takes those of a higher priority
	// first (negative ones after the default, 0). Within one OrderingID
	// order still comes first: a task waits for the tasks before it,
	// whatever their priorities. Each distinct value in use adds a little
	// to every claim; keep to a handful.
	Priority int32
	// GroupKey names who the task is for, such as a tenant. "" (the
	// default) for none; at most 255 bytes, no control characters. It
	// orders nothing.
	GroupKey string
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
			Kind: t.Kind, Payload: t.Payload, Traceparent: traceparent, Priority: t.Priority, GroupKey: t.GroupKey,
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
// The range of scheduled_at, control characters in a kind or group_key
// and the payload's depth are checked on both sides with the same
// message, so a Go caller learns of them without a round trip. Lengths, the in-the-past check and
// the payload size limit (of the stored jsonb, which only the server sees)
// are the SQL API's alone, identical for Go and psql users.
func validateTask(t Task, idx int) error {
	if err := validateKey(t.Key(), idx); err != nil {
		return err
	}
	for _, f := range []struct{ field, v string }{{"kind", t.Kind}, {"group_key", t.GroupKey}} {
		if err := validateText(idx, f.field, f.v); err != nil {
			return err
		}
		if hasControl(f.v) {
			return fieldError(idx, f.field, "contains a control character")
		}
	}
	if len(t.Payload) > 0 {
		if reason := jsonb.Problem(t.Payload, MaxPayloadDepth); reason != "" {
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

func fieldError(idx int, field, reason string) error {
	if idx >= 0 {
		return fmt.Errorf("pgsched: %w: %s %s (batch item %d)", ErrInvalidTask, field, reason, idx+1)
	}
	return fmt.Errorf("pgsched: %w: %s %s", ErrInvalidTask, field, reason)
}
