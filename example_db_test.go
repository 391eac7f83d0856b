package pgsched_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/pgschedmigrate"
)

// connect stands in, in the examples, for the pool a program already has
// and the schema it gives pgsched ("pgsched" by default): it connects to
// the test server and names a schema of the example's own for this run
// (name and random digits), so examples run at once against one database,
// by two test binaries or two people, never touch each other's tasks.
// The example drops it with dropSchema.
func connect(name string) (*pgxpool.Pool, string) {
	url, err := pgtest.URL()
	if err != nil {
		panic(err) // no server: every test of the binary fails the same way
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		panic(err) // a URL that does not parse
	}
	return pool, pgtest.FreshName(name)
}

// dropSchema drops an example's schema with everything in it, as a test
// cleans up after itself (a program keeps its schema). A failure is
// printed, so the example's output shows it.
func dropSchema(pool *pgxpool.Pool, schema string) {
	ctx := context.Background()
	m, err := pgschedmigrate.New(ctx, pool, pgschedmigrate.Config{Schema: schema})
	if err != nil {
		fmt.Println("dropping the example's schema:", err)
		return
	}
	defer m.Close()
	if err := m.Drop(ctx); err != nil {
		fmt.Println("dropping the example's schema:", err)
	}
}
