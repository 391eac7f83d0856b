package pgschedmigrate_test

import (
	"context"
	"fmt"

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
		fmt.Println(err)
		return
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()

	// Your schema's name ("pgsched" by default); the example's own for
	// this run, so runs sharing a database do not collide.
	schema := pgtest.FreshName("example_jobs")
	m, err := pgschedmigrate.New(ctx, pool, pgschedmigrate.Config{Schema: schema})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	defer func() {
		// The example cleans up after itself; a program keeps its schema.
		if err := m.Drop(ctx); err != nil {
			fmt.Println(err)
		}
	}()
	if err := m.Up(ctx); err != nil {
		fmt.Println(err)
		return
	}
	status, err := m.Status(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	applied := 0
	for _, s := range status {
		if s.Applied {
			applied++
		}
	}
	fmt.Println("all applied:", applied == len(status))
	// Output: all applied: true
}
