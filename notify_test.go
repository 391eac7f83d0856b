package pgsched_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/sqlschema"
)

// TestLongestSchemaNameNotifies: with the longest schema name accepted,
// enqueueing a due task still notifies on "<schema>.due" and the cluster
// channel "<schema>.assign" is a valid channel name (a longer schema made
// every enqueue of due work fail: channel name too long).
func TestLongestSchemaNameNotifiesOnBothChannelsWithoutError(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	require.Len(t, b.db.Schema, sqlschema.MaxLen, "the test name is long enough to give the longest schema name")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	conn, err := b.db.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	for _, ch := range []string{b.store.NotifyChannel(), b.store.AssignChannel()} {
		_, err = conn.Exec(ctx, `LISTEN "`+ch+`"`)
		require.NoError(t, err)
	}

	_, err = b.client.Schedule(ctx, pgsched.Task{OrderingID: "o", ScheduledAt: time.Now()})
	require.NoError(t, err)
	n, err := conn.Conn().WaitForNotification(ctx)
	require.NoError(t, err)
	require.Equal(t, b.store.NotifyChannel(), n.Channel)

	_, err = b.db.Pool.Exec(ctx, "SELECT pg_notify($1, '')", b.store.AssignChannel())
	require.NoError(t, err)
	n, err = conn.Conn().WaitForNotification(ctx)
	require.NoError(t, err)
	require.Equal(t, b.store.AssignChannel(), n.Channel)
}
