package pgsched_test

import (
	"context"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/pgschedmigrate"
)

// connect stands in, in the examples, for the pool a program already has:
// it connects to the test server and clears the example's schema left by
// an earlier run.
func connect(schema string) *pgxpool.Pool {
	ctx := context.Background()
	url, err := pgtest.URL()
	if err != nil {
		log.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	dropSchema(pool, schema)
	return pool
}

func dropSchema(pool *pgxpool.Pool, schema string) {
	ctx := context.Background()
	m, err := pgschedmigrate.New(ctx, pool, pgschedmigrate.Config{Schema: schema})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	if err := m.Drop(ctx); err != nil {
		log.Fatal(err)
	}
}
