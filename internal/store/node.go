package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsched/pgsched/internal/dbgen"
)

// Lease is a node's registration: its epoch and when its lease ends on the
// database clock.
type Lease struct {
	Epoch     int64
	ExpiresAt time.Time
}

// NodeRegister registers (or re-registers) a node with a new epoch; leaving
// is kept for a node that re-registers after it began to stop.
func (s *Store) NodeRegister(ctx context.Context, db DBTX, nodeID string, ttl time.Duration, host string, pid int, leaving bool) (Lease, error) {
	r, err := s.q.NodeRegister(ctx, s.db(db), dbgen.NodeRegisterParams{
		NodeID: nodeID, TtlSeconds: ttl.Seconds(), Host: host, Pid: int32(pid), Leaving: leaving,
	})
	if err != nil {
		return Lease{}, err
	}
	return Lease{Epoch: r.Epoch, ExpiresAt: r.LeaseExpiresAt}, nil
}

// NodeRenew extends a live lease. ErrLeaseLost means it had expired or the
// node was re-registered by someone else.
func (s *Store) NodeRenew(ctx context.Context, db DBTX, nodeID string, epoch int64, ttl time.Duration) (time.Time, error) {
	t, err := s.q.NodeRenewLease(ctx, s.db(db), dbgen.NodeRenewLeaseParams{NodeID: nodeID, Epoch: epoch, TtlSeconds: ttl.Seconds()})
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, ErrLeaseLost
	}
	return t, err
}

// NodeLeave marks the node as leaving: it keeps its lease while it drains,
// but serves no partition from now on.
func (s *Store) NodeLeave(ctx context.Context, db DBTX, nodeID string, epoch int64) error {
	return s.q.NodeLeave(ctx, s.db(db), dbgen.NodeLeaveParams{NodeID: nodeID, Epoch: epoch})
}

// NodeDeregister removes the node's row (clean shutdown).
func (s *Store) NodeDeregister(ctx context.Context, db DBTX, nodeID string, epoch int64) error {
	return s.q.NodeDeregister(ctx, s.db(db), dbgen.NodeDeregisterParams{NodeID: nodeID, Epoch: epoch})
}

// NodeCounts returns how many nodes hold a live lease and how many expired.
func (s *Store) NodeCounts(ctx context.Context, db DBTX) (active, inactive int, err error) {
	r, err := s.q.NodeCounts(ctx, s.db(db))
	return int(r.Active), int(r.Inactive), err
}
