package pgsched

import (
	"context"

	"github.com/pgsched/pgsched/internal/dispatch"
	"github.com/pgsched/pgsched/internal/lease"
)

// ErrLeaseExpired is returned by CheckFence once the node running a
// handler has passed its lease deadline: the task may already be running
// on another node.
var ErrLeaseExpired = lease.ErrExpired

// CheckFence reports whether the node running the handler whose context
// ctx is still holds the task: it returns an error wrapping
// ErrLeaseExpired once the node's lease deadline has passed by its own
// monotonic clock, and nil otherwise (also for a context that is not a
// handler's).
//
// The worker checks this before it starts each handler. A handler that
// takes a while before an effect it cannot take back (an HTTP call, an
// e-mail, a payment) calls it right before that effect: a node that wakes
// from a freeze with every timer overdue may run code before it has
// noticed that its lease is gone and its context is cancelled. What
// remains is the time between the check and the effect itself.
func CheckFence(ctx context.Context) error { return dispatch.CheckFence(ctx) }
