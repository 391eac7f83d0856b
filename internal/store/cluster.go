package store

import (
	"context"
	"time"

	"github.com/pgsched/pgsched/internal/dbgen"
)

// Member is a registered node, live or not, as the leader plans over it.
type Member struct {
	ID string
	// Leaving marks a node that is stopping cleanly: it drains but serves
	// no partition.
	Leaving bool
}

// Duty is a partition a node serves and the node it serves it for: itself,
// or a down node it stands in for.
type Duty struct {
	Partition int32
	Owner     string
}

// AssignChannel is the LISTEN/NOTIFY channel announcing cluster changes:
// leadership, joins and leaves, new assignments.
func (s *PG) AssignChannel() string { return s.rw.Schema() + ".assign" }

// LeaderAcquire takes or renews the leader lease and returns the term held,
// 0 when another node leads.
func (s *PG) LeaderAcquire(ctx context.Context, db DBTX, nodeID string, epoch int64, ttl time.Duration) (int64, error) {
	return s.q.LeaderAcquire(ctx, s.db(db), dbgen.LeaderAcquireParams{NodeID: nodeID, Epoch: epoch, TtlSeconds: ttl.Seconds()})
}

// LeaderResign gives up the leader lease if this node (and epoch) holds it.
func (s *PG) LeaderResign(ctx context.Context, db DBTX, nodeID string, epoch int64) (bool, error) {
	return s.q.LeaderResign(ctx, s.db(db), dbgen.LeaderResignParams{NodeID: nodeID, Epoch: epoch})
}

// Members lists every registered node.
func (s *PG) Members(ctx context.Context, db DBTX) ([]Member, error) {
	rows, err := s.q.ClusterMembers(ctx, s.db(db))
	if err != nil {
		return nil, err
	}
	out := make([]Member, len(rows))
	for i, r := range rows {
		out[i] = Member{ID: r.NodeID, Leaving: r.Leaving}
	}
	return out, nil
}

// PartitionOwners returns the owner of every partition, indexed by
// partition ("" where unassigned).
func (s *PG) PartitionOwners(ctx context.Context, db DBTX) ([]string, error) {
	rows, err := s.q.PartitionOwners(ctx, s.db(db))
	if err != nil {
		return nil, err
	}
	out := make([]string, len(rows))
	for _, r := range rows {
		if int(r.PartitionID) < len(out) {
			out[r.PartitionID] = r.NodeID
		}
	}
	return out, nil
}

// Backups returns node -> backup node.
func (s *PG) Backups(ctx context.Context, db DBTX) (map[string]string, error) {
	rows, err := s.q.BackupsList(ctx, s.db(db))
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		out[r.NodeID] = r.BackupNodeID
	}
	return out, nil
}

// Assign writes a leader's plan: owners[i] owns partition i, and
// backups[node] backs up node. It returns false, changing nothing, unless
// (nodeID, epoch) holds the leader lease.
func (s *PG) Assign(ctx context.Context, db DBTX, nodeID string, epoch int64, owners []string, backups map[string]string) (bool, error) {
	ids := make([]int32, len(owners))
	for i := range owners {
		ids[i] = int32(i)
	}
	of := make([]string, 0, len(backups))
	to := make([]string, 0, len(backups))
	for n, b := range backups {
		of, to = append(of, n), append(to, b)
	}
	return s.q.AssignmentApply(ctx, s.db(db), dbgen.AssignmentApplyParams{
		NodeID: nodeID, Epoch: epoch, PartitionIds: ids, Owners: owners, BackupOf: of, BackupNodes: to,
	})
}

// Deplete removes the nodes whose lease ended more than flexDown ago (their
// running tasks go back to their queues first). Leader only; returns the
// removed ids.
func (s *PG) Deplete(ctx context.Context, db DBTX, nodeID string, epoch int64, flexDown time.Duration) ([]string, error) {
	return s.q.NodesDeplete(ctx, s.db(db), dbgen.NodesDepleteParams{NodeID: nodeID, Epoch: epoch, FlexDownSeconds: flexDown.Seconds()})
}

// Duties returns the partitions nodeID serves now, as pgsched.partitions
// shows them.
func (s *PG) Duties(ctx context.Context, db DBTX, nodeID string) ([]Duty, error) {
	rows, err := s.q.NodeDuties(ctx, s.db(db), nodeID)
	if err != nil {
		return nil, err
	}
	out := make([]Duty, len(rows))
	for i, r := range rows {
		out[i] = Duty{Partition: r.PartitionID, Owner: r.OwnerNodeID}
	}
	return out, nil
}

// ExpiredUnserved returns the nodes whose lease expired and that no serving
// node stands in for.
func (s *PG) ExpiredUnserved(ctx context.Context, db DBTX) ([]string, error) {
	return s.q.NodesExpiredUnserved(ctx, s.db(db))
}

// StandIns returns the down nodes nodeID stands in for.
func (s *PG) StandIns(ctx context.Context, db DBTX, nodeID string) ([]string, error) {
	return s.q.NodeStandIns(ctx, s.db(db), nodeID)
}

// NotifyCluster wakes the leader and every node's assignment watcher.
func (s *PG) NotifyCluster(ctx context.Context, db DBTX) error {
	return s.q.ClusterNotify(ctx, s.db(db))
}

// BackedUp returns the nodes nodeID backs up, each with the time until its
// lease ends (negative: ended, or the node deregistered).
func (s *PG) BackedUp(ctx context.Context, db DBTX, nodeID string) (map[string]time.Duration, error) {
	rows, err := s.q.NodeBackedUp(ctx, s.db(db), nodeID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]time.Duration, len(rows))
	for _, r := range rows {
		out[r.NodeID] = time.Duration(r.ExpiresIn * float64(time.Second))
	}
	return out, nil
}
