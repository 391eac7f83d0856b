package dispatch

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// TestRefusal: a statement refused for the data it was given (class 22 or
// 23, or such a refusal relayed by Citus as XX000) is told apart from any
// other failure.
func TestRefusal(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code string
		ok   bool
	}{
		{&pgconn.PgError{Code: "23514", Message: `new row for relation "heads" violates check constraint "x"`}, "23514", true},
		{&pgconn.PgError{Code: "22021", Message: "invalid byte sequence"}, "22021", true},
		{&pgconn.PgError{Code: "XX000", Message: `new row for relation "dead_tasks_102208" violates check constraint "not_stuck_102208"`}, "XX000", true},
		{&pgconn.PgError{Code: "XX000", Message: "could not connect to the worker"}, "", false},
		{&pgconn.PgError{Code: "40001", Message: "could not serialize access"}, "", false},
		{&pgconn.PgError{Code: "", Message: "odd"}, "", false},
		{errors.New("connection reset"), "", false},
	} {
		code, ok := refusal(tc.err)
		require.Equal(t, tc.ok, ok, "%v", tc.err)
		require.Equal(t, tc.code, code, "%v", tc.err)
	}
}
