package pgsched_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/pgtest"
)

// Tests of promises the SQL API keeps, driven through the SQL functions a
// worker calls (node_register, claim_due_many, finish_tasks, ...) exactly
// as psql would, so they hold whatever shape the Go side takes.

// sqlRegister registers node through pgsched.node_register with a long
// lease and returns its epoch.
func sqlRegister(t *testing.T, db *pgtest.DB, node string) int64 {
	t.Helper()
	var epoch *int64
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		"SELECT epoch FROM "+db.Schema+".node_register($1, 'test', 600, 'host', 1, false, 0)", node).Scan(&epoch))
	require.NotNil(t, epoch, "node %s registered", node)
	return *epoch
}

// sqlClaimed is what claim_due_many and finish_tasks return of a task.
type sqlClaimed struct {
	Partition     int32
	ID            int64
	OrderingID    string
	UniquenessKey string
	Kind          string
	ClaimedAt     time.Time
}

// sqlClaim claims up to max due heads of every partition for (node, epoch).
func sqlClaim(t *testing.T, db *pgtest.DB, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, node string, epoch int64, max int) []sqlClaimed {
	t.Helper()
	rows, err := q.Query(context.Background(),
		"SELECT partition_id, id, ordering_id, uniqueness_key, kind, claimed_at FROM "+db.Schema+
			".claim_due_many($1, $2, ARRAY(SELECT generate_series(0, (SELECT partition_count - 1 FROM "+db.Schema+".settings))), $3)",
		node, epoch, max)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[sqlClaimed])
	require.NoError(t, err)
	return got
}

// TestClaimCostIndependentOfBacklog: a claim reads the heads it takes, not
// the backlog of due heads behind them (SPEC: a million due tasks must not
// make one claim slow). With thousands of due heads in every partition, a
// claim of ten reads a few dozen index entries and heap tuples at most, as
// counted by the server for the claiming transaction itself
// (pg_stat_xact_*), before and after the table is analyzed; and the look
// for due partitions is one probe each. Counts, not time: a plan that
// scans the due heads (a claim without ORDER BY run_at, a predicate the
// claim index cannot serve) reads thousands.
func TestClaimCostIndependentOfBacklog(t *testing.T) {
	t.Parallel()
	if pgtest.Citus() {
		t.Skip("counts a single server's statistics; on Citus the claims run on the workers (TestCitusHotPathIsRouted)")
	}
	b := setupClient(t)
	ctx := context.Background()
	s := b.db.Schema
	const backlog, max = 20000, 10
	_, err := b.db.Pool.Exec(ctx, "SELECT "+s+".schedule_many(array_agg('o-' || i), array_agg(now() - interval '1 second'), new_keys => true) "+
		"FROM generate_series(1, $1) AS i", backlog)
	require.NoError(t, err)
	epoch := sqlRegister(t, b.db, "cost-node")

	// read returns what the current transaction has read of the heads
	// table so far: index entries returned by its indexes, and heap
	// tuples read by sequential scans and fetched by index scans.
	read := func(tx pgx.Tx) (entries, tuples int64) {
		t.Helper()
		require.NoError(t, tx.QueryRow(ctx, `
			SELECT coalesce(sum(pg_stat_get_xact_tuples_returned(i.indexrelid)), 0)::bigint,
			       (SELECT coalesce(sum(t.seq_tup_read + coalesce(t.idx_tup_fetch, 0)), 0)::bigint
			        FROM pg_stat_xact_user_tables t
			        JOIN pg_inherits h ON h.inhrelid = t.relid
			        WHERE h.inhparent = '`+s+`.heads'::regclass)
			FROM pg_inherits h JOIN pg_index i ON i.indrelid = h.inhrelid
			WHERE h.inhparent = '`+s+`.heads'::regclass`).Scan(&entries, &tuples))
		return entries, tuples
	}
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			_, err := b.db.Pool.Exec(ctx, "ANALYZE "+s+".heads")
			require.NoError(t, err)
		}
		// Rolled back: every round claims from the same backlog.
		tx, err := b.db.Pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		e0, t0 := read(tx)
		var due int
		require.NoError(t, tx.QueryRow(ctx, "SELECT count(*) FROM "+s+".queue_next_due(ARRAY(SELECT generate_series(0, 7)))").Scan(&due))
		require.Equal(t, 8, due, "every partition has due heads")
		e1, t1 := read(tx)
		t.Logf("analyzed %v: looking for due partitions read %d index entries and %d heap tuples", analyzed, e1-e0, t1-t0)
		require.LessOrEqual(t, e1-e0, int64(3*8), "analyzed %v: index entries read looking for due partitions", analyzed)

		got := sqlClaim(t, b.db, tx, "cost-node", epoch, max)
		require.Len(t, got, max)
		e2, t2 := read(tx)
		t.Logf("analyzed %v: a claim of %d among %d due heads read %d index entries and %d heap tuples", analyzed, max, backlog, e2-e1, t2-t1)
		require.LessOrEqual(t, e2-e1, int64(3*max), "analyzed %v: index entries read by one claim", analyzed)
		require.LessOrEqual(t, t2-t1, int64(3*max), "analyzed %v: heap tuples read by one claim", analyzed)
		require.NoError(t, tx.Rollback(ctx))
	}
}
