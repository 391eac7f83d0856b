package pgsched_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/pgtest"
)

// TestLimitedClaimCostIndependentOfBacklog: a claim of a limited kind
// reads the parked heads it takes and a probe or two per group, not the
// kind's backlog behind them, with the backlog in one group (no
// group_key) and spread over many, as counted by the server for the
// claiming transaction itself (pg_stat_xact_*). Counts, not time: finding
// the next group by "cur IS NULL OR group > cur", or a group's due check
// written as a nested EXISTS (which the planner ran as a semi-join), read
// every parked head of the kind on every claim, so a limited kind slowed
// down as its backlog grew.
func TestLimitedClaimCostIndependentOfBacklog(t *testing.T) {
	t.Parallel()
	if pgtest.Citus() {
		t.Skip("counts the single-server claim's index reads; on Citus a limited claim reads by statements over the shards (docs/limits.md, \"On Citus\")")
	}
	b := setupClient(t)
	ctx := context.Background()
	s := b.db.Schema
	const backlog, max = 20000, 10
	_, err := b.db.Pool.Exec(ctx, "SELECT "+s+".set_limit('solo', max_running => 1000)")
	require.NoError(t, err)
	_, err = b.db.Pool.Exec(ctx, "SELECT "+s+".set_limit('shared', max_running => 1000)")
	require.NoError(t, err)
	// solo: every task without a group; shared: 200 groups of 100. Enqueued
	// after the limits are set, so parked (chain -1) from the start.
	_, err = b.db.Pool.Exec(ctx, "SELECT "+s+".schedule_many(array_agg('s-' || i), array_agg(now() - interval '1 second'), "+
		"kinds => array_agg('solo'::text), new_keys => true) FROM generate_series(1, $1) AS i", backlog)
	require.NoError(t, err)
	_, err = b.db.Pool.Exec(ctx, "SELECT "+s+".schedule_many(array_agg('g-' || i), array_agg(now() - interval '1 second'), "+
		"kinds => array_agg('shared'::text), group_keys => array_agg('grp-' || (i % 200)), new_keys => true) FROM generate_series(1, $1) AS i", backlog)
	require.NoError(t, err)
	var parked int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+s+".heads WHERE chain = -1").Scan(&parked))
	require.Equal(t, 2*backlog, parked, "every task waits parked for its limit")
	epoch := sqlRegister(t, b.db, "limited-cost-node")

	read := func(tx pgx.Tx) (int64, int64) { return headsRead(t, tx, s) }
	for _, kind := range []string{"solo", "shared"} {
		for _, analyzed := range []bool{false, true} {
			if analyzed {
				_, err := b.db.Pool.Exec(ctx, "ANALYZE "+s+".heads")
				require.NoError(t, err)
			}
			// Rolled back: every round claims from the same backlog. The
			// other kind is paused, so the claim takes this one's only.
			tx, err := b.db.Pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			other := map[string]string{"solo": "shared", "shared": "solo"}[kind]
			_, err = tx.Exec(ctx, "SELECT "+s+".pause_kind($1)", other)
			require.NoError(t, err)
			e0, t0 := read(tx)
			var due int
			require.NoError(t, tx.QueryRow(ctx, "SELECT count(*) FROM "+s+".queue_next_due(ARRAY(SELECT generate_series(0, 7)))").Scan(&due))
			require.Positive(t, due, "%s: the parked heads make partitions due", kind)
			e1, t1 := read(tx)
			t.Logf("%s, analyzed %v: looking for due partitions read %d index entries and %d heap tuples", kind, analyzed, e1-e0, t1-t0)
			require.LessOrEqual(t, e1-e0+t1-t0, int64(200), "%s, analyzed %v: entries and tuples read looking for due partitions", kind, analyzed)

			got := sqlClaim(t, b.db, tx, "limited-cost-node", epoch, max)
			require.Len(t, got, max, "%s: a claim takes as many as asked", kind)
			for _, c := range got {
				require.Equal(t, kind, c.Kind)
			}
			e2, t2 := read(tx)
			t.Logf("%s, analyzed %v: a claim of %d among %d parked heads read %d index entries and %d heap tuples", kind, analyzed, max, backlog, e2-e1, t2-t1)
			require.LessOrEqual(t, e2-e1, int64(30*max), "%s, analyzed %v: index entries read by one claim", kind, analyzed)
			require.LessOrEqual(t, t2-t1, int64(30*max), "%s, analyzed %v: heap tuples read by one claim", kind, analyzed)
			require.NoError(t, tx.Rollback(ctx))
		}
	}
}

// headsRead returns what tx has read of schema s's heads table so far:
// index entries returned by its indexes, and heap tuples read by
// sequential scans and fetched by index scans (pg_stat_xact_*).
func headsRead(t *testing.T, tx pgx.Tx, s string) (entries, tuples int64) {
	t.Helper()
	require.NoError(t, tx.QueryRow(context.Background(), `
		SELECT coalesce(sum(pg_stat_get_xact_tuples_returned(i.indexrelid)), 0)::bigint,
		       (SELECT coalesce(sum(t.seq_tup_read + coalesce(t.idx_tup_fetch, 0)), 0)::bigint
		        FROM pg_stat_xact_user_tables t
		        JOIN pg_inherits h ON h.inhrelid = t.relid
		        WHERE h.inhparent = '`+s+`.heads'::regclass)
		FROM pg_inherits h JOIN pg_index i ON i.indrelid = h.inhrelid
		WHERE h.inhparent = '`+s+`.heads'::regclass`).Scan(&entries, &tuples))
	return entries, tuples
}
