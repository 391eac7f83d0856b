package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/dispatch"
	"github.com/pgsched/pgsched/internal/lease"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/store"
)

// newNode is what the dispatcher tests start from: a schema, its store, a
// client to enqueue with and a node "n1" (not yet registered) whose lease
// lasts ttl.
func newNode(t *testing.T, opts pgtest.SchemaOptions, ttl time.Duration) (*pgtest.DB, store.Store, *pgsched.Client, *lease.Node) {
	t.Helper()
	db := pgtest.NewSchema(t, opts)
	st, err := store.Open(context.Background(), db.Pool, db.Schema)
	require.NoError(t, err)
	client, err := pgsched.NewClient(db.Pool, pgsched.ClientConfig{Schema: db.Schema})
	require.NoError(t, err)
	node, err := lease.NewNode(lease.NodeConfig{ID: "n1", Store: st, DB: db.Pool, TTL: ttl})
	require.NoError(t, err)
	return db, st, client, node
}

// run registers node, waits for its first term and runs d under it until
// the test ends; then it stops d, and the node after it. A test that must
// unblock its handlers first registers that cleanup after calling run
// (cleanups run last-registered first).
func run(t *testing.T, node *lease.Node, d *dispatch.Dispatcher) {
	t.Helper()
	runCtx, cancel := context.WithCancel(context.Background())
	nodeCtx, nodeStop := context.WithCancel(context.Background())
	nodeDone, runDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(nodeDone); _ = node.Run(nodeCtx) }()
	require.Eventually(t, func() bool { return node.Current() != nil }, pgtest.Patience(10*time.Second), 5*time.Millisecond)
	go func() { defer close(runDone); _ = d.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		<-runDone
		nodeStop()
		<-nodeDone
	})
}
