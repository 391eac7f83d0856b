package webhook

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDeliverBeforeSendRefuses: when the check right before the send
// fails, nothing reaches the receiver and the error, which wraps the
// check's, is retryable (the task is another node's to run now).
func TestDeliverBeforeSendRefuses(t *testing.T) {
	t.Parallel()
	srv, reqs := newServer(t, nil)
	fenced := errors.New("lease expired")
	live := true
	e := newExecutor(t, "*="+srv.URL, func(c *Config) {
		c.BeforeSend = func(context.Context) error {
			if live {
				return nil
			}
			return fenced
		}
	})

	require.NoError(t, e.Deliver(context.Background(), testTask("a")))
	recv(t, reqs)

	live = false
	err := e.Deliver(context.Background(), testTask("a"))
	require.ErrorIs(t, err, fenced)
	require.False(t, IsPermanent(err))
	select {
	case c := <-reqs:
		t.Fatalf("a request was sent after the check failed: %s", c.body)
	default:
	}
}
