package pgsched_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// TestConfigureRefusesRetentionShorterThanGrace: a completed key must not
// be enqueueable once its tombstone is gone, so a retention that does not
// outlive the grace window is refused with a clear error and nothing
// changes, through configure and through a plain UPDATE alike; a sound
// change is taken.
func TestConfigureRefusesRetentionShorterThanGrace(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	s := b.db.Schema
	for _, call := range []string{
		"SELECT * FROM " + s + ".configure(completion_retention => '4 seconds')",
		"SELECT * FROM " + s + ".configure(grace => '8 days')",
		"SELECT * FROM " + s + ".configure(grace => '1 hour', completion_retention => '1 hour')",
	} {
		_, err := b.db.Pool.Exec(ctx, call)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%s: %v", call, err)
		require.Equal(t, "PGS01", pgErr.Code)
		require.Contains(t, pgErr.Message, "completion_retention", call)
		require.Contains(t, pgErr.Message, "must be longer than grace", call)
	}
	_, err := b.db.Pool.Exec(ctx, "UPDATE "+s+".settings SET completion_retention = '3 seconds'")
	require.ErrorContains(t, err, "completion_retention_longer_than_grace")
	_, err = b.db.Pool.Exec(ctx, "SELECT * FROM "+s+".configure(grace => '-1 second')")
	require.ErrorContains(t, err, "grace must not be negative")

	var grace, retention time.Duration
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT grace, completion_retention FROM "+s+".settings").Scan(&grace, &retention))
	require.Equal(t, 5*time.Second, grace, "unchanged")
	require.Equal(t, 7*24*time.Hour, retention, "unchanged")

	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT grace, completion_retention FROM "+s+".configure(grace => '1 minute', completion_retention => '2 days')").
		Scan(&grace, &retention))
	require.Equal(t, time.Minute, grace)
	require.Equal(t, 48*time.Hour, retention)
}

// TestRetentionBoundedOverTenDays: with a fixed clock moved a day at a
// time over ten days of steady completions, the leader's partition upkeep
// (ensure_completion_partitions, as it runs it) keeps the number of
// completion partitions and their total size bounded: whole days older
// than the retention are dropped, a few days ahead exist.
func TestRetentionBoundedOverTenDays(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	s := b.db.Schema
	_, err := b.db.Pool.Exec(ctx, "SELECT * FROM "+s+".configure(completion_retention => '2 days')")
	require.NoError(t, err)

	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	const perDay, ahead = 20000, 3
	var sizes []int64
	for day := range 10 {
		at := t0.Add(time.Duration(day) * 24 * time.Hour)
		_, err := b.db.Pool.Exec(ctx, "SELECT "+s+".ensure_completion_partitions($1, $2)", at, ahead)
		require.NoError(t, err)
		// A day of completions, spread over it.
		_, err = b.db.Pool.Exec(ctx, `INSERT INTO `+s+`.completions (partition_id, ordering_id, scheduled_at, uniqueness_key, kind, attempt, node_id, completed_at)
			SELECT i % 8, 'o-' || i, $1::timestamptz + (i * interval '4 seconds'), '', 'k', 1, 'n', $1::timestamptz + (i * interval '4 seconds')
			FROM generate_series(0, $2 - 1) AS i`, at, perDay)
		require.NoError(t, err)

		var parts int
		var size int64
		var oldest time.Time
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(pg_total_relation_size(i.inhrelid)), 0),
				min(to_date(substr(c.relname, 13), 'YYYYMMDD'))::timestamptz
			FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
			WHERE i.inhparent = '`+s+`.completions'::regclass`).Scan(&parts, &size, &oldest))
		// Today, the days ahead, and the retention's days behind (two, and
		// the one it reaches into).
		require.LessOrEqual(t, parts, 1+ahead+3, "day %d: %d partitions", day, parts)
		require.False(t, oldest.Before(at.Add(-3*24*time.Hour)), "day %d: a partition from %s outlived the retention", day, oldest)
		sizes = append(sizes, size)
	}
	t.Logf("completion partitions' total size by day: %v", sizes)
	require.LessOrEqual(t, sizes[9], sizes[4]*5/4, "size stays bounded: day 9 %d vs day 4 %d", sizes[9], sizes[4])
}
