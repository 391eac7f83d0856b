// Package store is the only door to the database: it runs the sqlc queries of
// internal/dbgen in the configured schema, converts rows to plain Go values and
// turns driver errors into the sentinels the rest of pgsched speaks.
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsched/pgsched/internal/dbgen"
	"github.com/pgsched/pgsched/internal/pgarray"
	"github.com/pgsched/pgsched/internal/sqlschema"
)

// Errors raised by the SQL API (SQLSTATE class PGS) and by validation.
var (
	ErrInvalid   = errors.New("invalid task")
	ErrInPast    = errors.New("scheduled time is in the past")
	ErrRunning   = errors.New("task is running")
	ErrNotFound  = errors.New("no such pending task")
	ErrConflict  = errors.New("task key already exists or was completed")
	ErrLeaseLost = errors.New("node lease lost")
	// ErrHasHead: ScheduleMany with newKeys met an ordering_id that already
	// has a task; nothing was written.
	ErrHasHead = errors.New("an ordering_id of the batch already has a task")
)

// DBTX is a pool, connection or transaction.
type DBTX = sqlschema.DBTX

// PG runs pgsched's statements in one schema on one PostgreSQL (or, for
// what Citus runs the same way, on a Citus coordinator: see Citus).
type PG struct {
	q  *dbgen.Queries
	rw *sqlschema.Rewriter
}

// New returns the single-server Store for schema ("" means the default,
// pgsched). Clients and the console use it on Citus too: what they run
// goes through the coordinator there as it is.
func New(schema string) (*PG, error) {
	if schema == "" {
		schema = sqlschema.Default
	}
	rw, err := sqlschema.NewRewriter(schema)
	if err != nil {
		return nil, err
	}
	return &PG{q: dbgen.New(), rw: rw}, nil
}

// Schema is the schema this store works in.
func (s *PG) Schema() string { return s.rw.Schema() }

// NotifyChannel is the LISTEN/NOTIFY channel announcing newly due work.
func (s *PG) NotifyChannel() string { return s.rw.Schema() + ".due" }

func (s *PG) db(db DBTX) dbgen.DBTX { return pgarray.Wrap(s.rw.Wrap(db)) }

// translate maps SQL API errors to sentinels, keeping the server's message.
func translate(err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		var sentinel error
		switch pgErr.Code {
		case "PGS01", "22P05", "22P02", "22021", "23514":
			sentinel = ErrInvalid
		case "PGS02":
			sentinel = ErrInPast
		case "PGS03":
			sentinel = ErrRunning
		case "PGS04":
			sentinel = ErrNotFound
		case "PGS05":
			sentinel = ErrConflict
		case "23505":
			// Only schedule_many with new_keys inserts heads without
			// ON CONFLICT. Citus passes a worker's error on without the
			// constraint's name (which has the shard's number appended).
			if strings.HasPrefix(pgErr.ConstraintName, "heads") ||
				(pgErr.ConstraintName == "" && strings.Contains(pgErr.Message, `constraint "heads`)) {
				sentinel = ErrHasHead
			}
		}
		if sentinel != nil {
			return fmt.Errorf("%w: %s", sentinel, pgErr.Message)
		}
	}
	return err
}

// Unavailable reports whether err means the database did not run a
// statement because of its own state, not the statement's: no answer (a
// lost or refused connection, a timeout on the wire) or a
// server shutting down, starting up, out of connections or resources,
// failed over to a read-only standby, or failing at I/O. Every other
// statement would meet it too, so it is no reason to give up on one.
func Unavailable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		c := pgErr.Code
		return strings.HasPrefix(c, "08") || strings.HasPrefix(c, "53") || strings.HasPrefix(c, "57P") ||
			strings.HasPrefix(c, "58") || c == "25006"
	}
	for _, sentinel := range []error{ErrInvalid, ErrInPast, ErrRunning, ErrNotFound, ErrConflict, ErrLeaseLost, ErrHasHead} {
		if errors.Is(err, sentinel) {
			return false
		}
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// NewTask is one task to enqueue. Empty Kind, nil Payload take the defaults.
type NewTask struct {
	OrderingID    string
	ScheduledAt   time.Time
	UniquenessKey string
	Kind          string
	Payload       []byte
	// Traceparent is the enqueueing call's W3C trace context, "" for none.
	Traceparent string
	// Priority orders due heads (higher first); GroupKey, "" for none.
	Priority int32
	GroupKey string
}

// ScheduleMany enqueues tasks atomically in one statement and returns one
// result word per task. newKeys promises that no ordering_id of the batch
// has a task yet: cheaper, and ErrHasHead (nothing written) when wrong.
func (s *PG) ScheduleMany(ctx context.Context, db DBTX, tasks []NewTask, newKeys bool) ([]string, error) {
	n := len(tasks)
	arg := dbgen.TaskScheduleManyParams{
		NewKeys:        newKeys,
		OrderingIds:    make([]string, n),
		ScheduledAts:   make([]time.Time, n),
		UniquenessKeys: make([]string, n),
		Payloads:       make([][]byte, n),
		Kinds:          make([]string, n),
	}
	for i, t := range tasks {
		arg.OrderingIds[i] = t.OrderingID
		arg.ScheduledAts[i] = t.ScheduledAt
		arg.UniquenessKeys[i] = t.UniquenessKey
		arg.Payloads[i] = t.Payload
		if len(t.Payload) == 0 {
			arg.Payloads[i] = []byte("{}")
		}
		arg.Kinds[i] = t.Kind
		if t.Kind == "" {
			arg.Kinds[i] = "default"
		}
		if t.Traceparent != "" {
			// Only a batch with a trace sends the array (NULL otherwise).
			if arg.Traceparents == nil {
				arg.Traceparents = make([]string, n)
			}
			arg.Traceparents[i] = t.Traceparent
		}
		// Likewise priorities and group keys: a batch at the defaults
		// sends NULL, so schedule_many does no more than before.
		if t.Priority != 0 {
			if arg.Priorities == nil {
				arg.Priorities = make([]int32, n)
			}
			arg.Priorities[i] = t.Priority
		}
		if t.GroupKey != "" {
			if arg.GroupKeys == nil {
				arg.GroupKeys = make([]string, n)
			}
			arg.GroupKeys[i] = t.GroupKey
		}
	}
	res, err := s.q.TaskScheduleMany(ctx, s.db(db), arg)
	if err != nil {
		return nil, translate(err)
	}
	if len(res) != n {
		return nil, fmt.Errorf("schedule_many returned %d results for %d tasks", len(res), n)
	}
	return res, nil
}

// Cancel removes a pending task.
func (s *PG) Cancel(ctx context.Context, db DBTX, orderingID string, scheduledAt time.Time, uniquenessKey string) error {
	return translate(s.q.TaskCancel(ctx, s.db(db), dbgen.TaskCancelParams{
		OrderingID: orderingID, ScheduledAt: scheduledAt, UniquenessKey: uniquenessKey,
	}))
}

// Reschedule moves a pending task to a new time atomically.
func (s *PG) Reschedule(ctx context.Context, db DBTX, orderingID string, scheduledAt time.Time, uniquenessKey string, newAt time.Time) error {
	return translate(s.q.TaskReschedule(ctx, s.db(db), dbgen.TaskRescheduleParams{
		OrderingID: orderingID, ScheduledAt: scheduledAt, UniquenessKey: uniquenessKey, NewScheduledAt: newAt,
	}))
}

// Settings are the installation-wide values chosen at migrate time.
type Settings struct {
	PartitionCount  int
	Grace           time.Duration
	Retention       time.Duration
	MaxPayloadBytes int
	DBNow           time.Time
}

// Settings reads the installation's settings and the database clock.
func (s *PG) Settings(ctx context.Context, db DBTX) (Settings, error) {
	r, err := s.q.SettingsGet(ctx, s.db(db))
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Settings{}, fmt.Errorf("schema %s has no settings row (not migrated?): %w", s.Schema(), err)
		}
		// Whether the schema is missing or the server unreachable is for
		// the caller to tell from err (pgsched.ErrSchemaNotReady,
		// ErrDatabaseUnavailable); a guess here would mislead.
		return Settings{}, fmt.Errorf("reading settings from schema %s: %w", s.Schema(), err)
	}
	return Settings{
		PartitionCount:  int(r.PartitionCount),
		Grace:           seconds(r.GraceSeconds),
		Retention:       seconds(r.RetentionSeconds),
		MaxPayloadBytes: int(r.MaxPayloadBytes),
		DBNow:           r.DbNow,
	}, nil
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
