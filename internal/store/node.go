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

// Why a registration must wait (see pgsched.node_register).
const (
	// WaitNodeID: another process holds a live lease on the node id.
	WaitNodeID = "node_id"
	// WaitFailover: the server became the primary of a new timeline, and
	// leases the old primary granted may still run.
	WaitFailover = "failover"
)

// Registration is NodeRegister's answer: a new term (Lease), or, when Wait
// is set, why the node may not register yet and for how long.
type Registration struct {
	Lease
	Wait string // "", WaitNodeID or WaitFailover
	// WaitFor is how long until the wait ends, on the database clock.
	WaitFor time.Duration
	// HolderHost and HolderPID name the process holding the node id
	// (WaitNodeID).
	HolderHost string
	HolderPID  int
	// Timeline is the server's timeline (0 on Citus), and TimelineSince
	// when the first node registered on it (WaitFailover).
	Timeline      int
	TimelineSince time.Time
}

// NodeRegister registers (or re-registers) a node with a new epoch, greater
// than afterEpoch, unless it must wait (see Registration). instance tells
// this process from any other using the same node id; leaving is kept for
// a node that re-registers after it began to stop.
func (s *PG) NodeRegister(ctx context.Context, db DBTX, nodeID, instance string, ttl time.Duration, host string, pid int,
	leaving bool, afterEpoch int64) (Registration, error) {
	r, err := s.q.NodeRegister(ctx, s.db(db), dbgen.NodeRegisterParams{
		NodeID: nodeID, Instance: instance, TtlSeconds: ttl.Seconds(), Host: host, Pid: int32(pid), Leaving: leaving,
		AfterEpoch: afterEpoch,
	})
	if err != nil {
		return Registration{}, err
	}
	return Registration{
		Lease: Lease{Epoch: r.Epoch, ExpiresAt: r.LeaseExpiresAt},
		Wait:  r.WaitReason, WaitFor: r.WaitUntil.Sub(r.DbNow),
		HolderHost: r.HolderHost, HolderPID: int(r.HolderPid),
		Timeline: int(r.Timeline), TimelineSince: r.TimelineSince,
	}, nil
}

// NodeRenew extends a live lease. ErrLeaseLost means it had expired, the
// node was re-registered by someone else, or the server is the primary of
// another timeline than the one the term registered on (a failover).
func (s *PG) NodeRenew(ctx context.Context, db DBTX, nodeID string, epoch int64, ttl time.Duration) (time.Time, error) {
	t, err := s.q.NodeRenewLease(ctx, s.db(db), dbgen.NodeRenewLeaseParams{NodeID: nodeID, Epoch: epoch, TtlSeconds: ttl.Seconds()})
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, ErrLeaseLost
	}
	return t, err
}

// NodeLeave marks the node as leaving: it keeps its lease while it drains,
// but serves no partition from now on.
func (s *PG) NodeLeave(ctx context.Context, db DBTX, nodeID string, epoch int64) error {
	return s.q.NodeLeave(ctx, s.db(db), dbgen.NodeLeaveParams{NodeID: nodeID, Epoch: epoch})
}

// NodeDeregister removes the node's row (clean shutdown).
func (s *PG) NodeDeregister(ctx context.Context, db DBTX, nodeID string, epoch int64) error {
	return s.q.NodeDeregister(ctx, s.db(db), dbgen.NodeDeregisterParams{NodeID: nodeID, Epoch: epoch})
}

// NodeCounts returns how many nodes hold a live lease and how many expired.
func (s *PG) NodeCounts(ctx context.Context, db DBTX) (active, inactive int, err error) {
	r, err := s.q.NodeCounts(ctx, s.db(db))
	return int(r.Active), int(r.Inactive), err
}
