package pgsched

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsched/pgsched/internal/schemaversion"
	"github.com/pgsched/pgsched/pgschedtype"
)

// Errors a caller tells apart with errors.Is. Config errors and
// ErrSchemaNewer never heal, so retrying is pointless; ErrSchemaNotReady
// and ErrDatabaseUnavailable come from Start and heal once the database is
// reachable and migrated, so Start may simply be called again.
var (
	// ErrInvalidConfig wraps every error NewWorker returns for a Config it
	// refuses; the message names the field (see ConfigError).
	ErrInvalidConfig = errors.New("pgsched: invalid config")
	// ErrAlreadyStarted is returned by Start on a worker that is running or
	// starting.
	ErrAlreadyStarted = errors.New("pgsched: worker already started")
	// ErrSchemaNotReady is returned by Start when the configured schema, or
	// one of its tables, functions or its settings row, is not there yet:
	// the schema is not migrated (or not migrated far enough).
	ErrSchemaNotReady = errors.New("pgsched: schema not ready")
	// ErrDatabaseUnavailable is returned by Start when the database cannot be
	// reached or refuses connections for now (starting up, shutting down,
	// too many connections).
	ErrDatabaseUnavailable = errors.New("pgsched: database unavailable")
	// ErrNodeIDInUse is what Readiness says while another process holds a
	// live lease on the worker's node id: the worker waits until that
	// process deregisters or its lease runs out, and never runs alongside
	// it (Start returns once it holds the id).
	ErrNodeIDInUse = errors.New("pgsched: node id in use by another process")
	// ErrFailoverWait is what Readiness says while the database, newly the
	// primary of another timeline (a promoted standby), waits for every
	// lease of the old primary to run out before any node registers there.
	ErrFailoverWait = errors.New("pgsched: waiting out the old primary's leases after a database failover")
	// ErrSchemaNewer is returned by Start ("schema version N is newer than
	// this build (M); upgrade the worker") when a newer pgsched migrated the
	// schema past this build: its tables and functions may no longer be
	// what this build's SQL expects. It does not heal by retrying; upgrade
	// the worker. pgschedmigrate's Up refuses such a schema with it too.
	ErrSchemaNewer = schemaversion.ErrNewer
	// ErrInvalidOutput is returned by Job.RecordOutput for a value it
	// cannot keep (see there).
	ErrInvalidOutput = pgschedtype.ErrInvalidOutput
)

// errStoppedWhileStarting is what Start returns when Stop ends it.
var errStoppedWhileStarting = errors.New("pgsched: stopped while starting")

// ConfigError is a Config that NewWorker refuses. It matches
// ErrInvalidConfig, and the underlying cause (for example
// sqlschema.ErrInvalidName for Schema), with errors.Is.
type ConfigError struct {
	// Field is the WorkerConfig field at fault, e.g. "LeaseTTL" or
	// `Handlers["email"]`; a program mapping its own settings onto WorkerConfig
	// uses it to name the setting at fault.
	Field string
	// Err says what is wrong, naming the field.
	Err error
}

func (e *ConfigError) Error() string { return ErrInvalidConfig.Error() + ": " + e.Err.Error() }

// Unwrap lets errors.Is match both ErrInvalidConfig and the cause.
func (e *ConfigError) Unwrap() []error { return []error{ErrInvalidConfig, e.Err} }

// configErr returns a ConfigError for field; format should name the field.
func configErr(field, format string, args ...any) error {
	return &ConfigError{Field: field, Err: fmt.Errorf(format, args...)}
}

// SQLSTATEs meaning the schema is not (fully) migrated: undefined schema,
// table, function and column.
var schemaNotReadyCodes = map[string]bool{"3F000": true, "42P01": true, "42883": true, "42703": true}

// SQLSTATEs meaning the server cannot serve us for now: the connection
// exception class (08), too many connections, and shutting down or
// starting up.
var unavailableCodes = map[string]bool{"53300": true, "57P01": true, "57P02": true, "57P03": true}

// startError wraps a database error from Start with the sentinel for its
// class, so a caller can tell an error that heals from one that does not.
func startError(err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	isPg := errors.As(err, &pgErr)
	switch {
	case isPg && schemaNotReadyCodes[pgErr.Code], errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: %w", ErrSchemaNotReady, err)
	case isPg && (unavailableCodes[pgErr.Code] || strings.HasPrefix(pgErr.Code, "08")), unreachable(err):
		return fmt.Errorf("%w: %w", ErrDatabaseUnavailable, err)
	case strings.HasPrefix(err.Error(), "pgsched: "):
		return err
	}
	return fmt.Errorf("pgsched: %w", err)
}

// unreachable reports a failure to connect or a broken connection.
func unreachable(err error) bool {
	var connErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.Timeout(err)
}
