package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// TestUnavailable: the database's own trouble (no answer, shutting down,
// out of resources, read-only after a failover) is told apart from a
// statement it refused, which is the statement's.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return &pgconn.PgError{Code: code, Message: "m"} }
	for _, c := range []struct {
		err  error
		want bool
	}{
		{pg("08006"), true}, // connection failure
		{pg("57P01"), true}, // admin shutdown
		{pg("57P03"), true}, // cannot connect now
		{pg("53300"), true}, // too many connections
		{pg("58030"), true}, // I/O error
		{pg("25006"), true}, // read-only transaction: a standby
		{fmt.Errorf("x: %w", pg("08P01")), true},
		{io.ErrUnexpectedEOF, true},
		{fmt.Errorf("reading: %w", io.EOF), true},
		{&pgconn.ConnectError{}, true},
		{pgconn.ErrConnClosed, true},
		{translate(pg("PGS01")), false},
		{translate(pg("PGS03")), false},
		{pg("57014"), false}, // statement timeout: this statement's
		{pg("40P01"), false}, // deadlock
		{pg("55P03"), false}, // lock timeout
		{pg("22P02"), false},
		{pg("XX000"), false},
		{errors.New(`cronspec: unknown time zone "posix/Europe/Berlin"`), false},
		{context.Canceled, false},
	} {
		require.Equal(t, c.want, Unavailable(c.err), "%v", c.err)
	}
}
