package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/pgschedmigrate"
)

// RolesSchema migrates a fresh schema named prefix_<random> with its three
// least-privilege roles (migrate -roles) and drops the schema and the
// roles when the test ends. On Citus the roles may log in: Citus opens its
// connections to the workers as the current role, so a session acting as
// one of them needs that there.
func RolesSchema(t *testing.T, prefix string) string {
	t.Helper()
	ctx := context.Background()
	var b [5]byte
	_, _ = rand.Read(b[:])
	schema := prefix + "_" + hex.EncodeToString(b[:])
	admin := AdminPool(t)
	m, err := pgschedmigrate.New(ctx, admin, pgschedmigrate.Config{Schema: schema, Partitions: 8, Roles: true, Citus: Citus()})
	require.NoError(t, err)
	roles := []string{"_enqueue", "_worker", "_read"}
	t.Cleanup(func() {
		require.NoError(t, m.Drop(context.Background()))
		_ = m.Close()
		for _, r := range roles {
			_, err := admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+schema+r)
			require.NoError(t, err)
		}
	})
	require.NoError(t, m.Up(ctx))
	if Citus() {
		for _, r := range roles {
			_, err := admin.Exec(ctx, "ALTER ROLE "+schema+r+" LOGIN")
			require.NoError(t, err)
		}
	}
	return schema
}
