// Command migrate applies pgsched's schema, embedded in this binary.
//
//	migrate [flags] up|down|reset|status
//
// Flags mirror environment variables: -database-url (DATABASE_URL), -schema
// (PGSCHED_SCHEMA), -partitions (PGSCHED_PARTITIONS) and -table-partitions
// (PGSCHED_TABLE_PARTITIONS), both used only when the schema is first
// created.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgsched/pgsched/pgschedmigrate"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "migrate:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	partitions := pgschedmigrate.DefaultPartitions
	if v := getenv("PGSCHED_PARTITIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("PGSCHED_PARTITIONS=%q is not a number", v)
		}
		partitions = n
	}
	tablePartitions := 0
	if v := getenv("PGSCHED_TABLE_PARTITIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("PGSCHED_TABLE_PARTITIONS=%q is not a number", v)
		}
		tablePartitions = n
	}
	schema := getenv("PGSCHED_SCHEMA")
	if schema == "" {
		schema = "pgsched"
	}
	dbURL := fs.String("database-url", getenv("DATABASE_URL"), "PostgreSQL connection string (DATABASE_URL)")
	fs.StringVar(&schema, "schema", schema, "schema holding pgsched's tables (PGSCHED_SCHEMA)")
	fs.IntVar(&partitions, "partitions", partitions, "logical partitions, fixed when the schema is created (PGSCHED_PARTITIONS)")
	fs.IntVar(&tablePartitions, "table-partitions", tablePartitions, "physical partitions of heads and backlog, fixed when the schema is created; 0: min(2, partitions), with -citus 1 (PGSCHED_TABLE_PARTITIONS)")
	citus := fs.Bool("citus", false, "with up, on a Citus coordinator: distribute the task tables by partition (one shard per partition, co-located) and make the rest reference tables")
	roles := fs.Bool("roles", false, "with up: create the roles <schema>_enqueue, <schema>_worker and <schema>_read and grant them their privileges (needs CREATEROLE)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: migrate [flags] up|down|reset|status")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("want exactly one command: up, down, reset or status")
	}
	if *dbURL == "" {
		return errors.New("no database: set DATABASE_URL or -database-url")
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	poolCfg, err := pgxpool.ParseConfig(*dbURL)
	if err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg) // connects lazily; the migrator opens its own
	if err != nil {
		return err
	}
	defer pool.Close()
	m, err := pgschedmigrate.New(ctx, pool, pgschedmigrate.Config{Schema: schema, Partitions: partitions, TablePartitions: tablePartitions, Roles: *roles, Citus: *citus, Logger: logger})
	if err != nil {
		return err
	}
	defer m.Close()
	switch cmd := fs.Arg(0); cmd {
	case "up":
		return m.Up(ctx)
	case "down":
		return m.Down(ctx)
	case "reset":
		return m.Reset(ctx)
	case "status":
		// On a schema newer than this build, the list (its newer versions
		// too) and then the error saying so, which exits 1.
		st, err := m.Status(ctx)
		for _, s := range st {
			state := "pending"
			if s.Applied {
				state = "applied " + s.AppliedAt.Format("2006-01-02 15:04:05")
			}
			name := s.Name
			if s.Newer {
				name = "(newer than this build)"
			}
			fmt.Fprintf(stdout, "%05d  %-30s  %s\n", s.Version, name, state)
		}
		return err
	default:
		return fmt.Errorf("unknown command %q: want up, down, reset or status", cmd)
	}
}
