package pgschedmigrate_test

import (
	"context"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/pgschedmigrate"
)

// Migrate pgsched's schema from a program at start, over its own pool.
// Up is safe at every start and from many processes at once.
func Example() {
	ctx := context.Background()
	url, err := pgtest.URL() // your database's URL
	if err != nil {
		log.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	m, err := pgschedmigrate.New(ctx, pool, pgschedmigrate.Config{Schema: "example_jobs"})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	if err := m.Drop(ctx); err != nil { // a clean start for the example only
		log.Fatal(err)
	}
	if err := m.Up(ctx); err != nil {
		log.Fatal(err)
	}
	status, err := m.Status(ctx)
	if err != nil {
		log.Fatal(err)
	}
	applied := 0
	for _, s := range status {
		if s.Applied {
			applied++
		}
	}
	fmt.Println("all applied:", applied == len(status))
	if err := m.Drop(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: all applied: true
}
