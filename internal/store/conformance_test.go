package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/internal/store"
	"github.com/pgsched/pgsched/internal/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestConformance runs the store suite against the store each schema
// needs: the single-server store here, the Citus store in the Citus suite
// (make test-citus), where every schema is distributed.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Fixture {
		db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
		st, err := store.Open(context.Background(), db.Pool, db.Schema)
		require.NoError(t, err)
		if pgtest.Citus() {
			require.IsType(t, &store.Citus{}, st, "a distributed schema gets the Citus store")
		} else {
			require.IsType(t, &store.PG{}, st)
		}
		s, err := st.Settings(context.Background(), db.Pool)
		require.NoError(t, err)
		return storetest.Fixture{Store: st, Pool: db.Pool, Partitions: s.PartitionCount, DB: db}
	})
}
