package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgsched/pgsched/internal/localpg"
	"github.com/pgsched/pgsched/internal/migrator"
)

// database is the PostgreSQL the run uses and the schema migrated in it.
type database struct {
	url    string
	schema string
	pg     *localpg.Server // nil when DATABASE_URL was given
	// standby follows pg synchronously (-mode failover); nil otherwise.
	standby *localpg.Server
	pool    *pgxpool.Pool
}

// openDatabase uses databaseURL, or starts a durable throwaway server in
// workDir: the immediate restart must lose only what a crash would. With
// standby, it also starts a synchronous streaming standby of that server,
// and url names both (pgx's multi-host form), so that clients follow a
// promotion by themselves.
func openDatabase(ctx context.Context, databaseURL, workDir, schema string, standby bool, logger *slog.Logger) (*database, error) {
	db := &database{url: databaseURL, schema: schema}
	if db.url == "" {
		var settings []string
		if standby {
			settings = []string{"synchronous_standby_names = '*'"}
		}
		srv, err := localpg.Start(ctx, localpg.Options{DataDir: filepath.Join(workDir, "pgdata"), Durable: true,
			Settings: settings, Logger: logger})
		if err != nil {
			return nil, fmt.Errorf("starting a local PostgreSQL: %w", err)
		}
		db.pg, db.url = srv, srv.URL()
		if standby {
			sb, err := localpg.StartStandby(ctx, srv, localpg.Options{DataDir: filepath.Join(workDir, "pgstandby"), Durable: true,
				Logger: logger})
			if err != nil {
				db.close(ctx)
				return nil, fmt.Errorf("starting a standby: %w", err)
			}
			db.standby = sb
			db.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
				srv.Port(), sb.Port())
		}
	}
	if err := migrator.Up(ctx, db.url, migrator.Options{Schema: schema}); err != nil {
		db.close(ctx)
		return nil, fmt.Errorf("migrating schema %s: %w", schema, err)
	}
	pool, err := pgxpool.New(ctx, db.url)
	if err != nil {
		db.close(ctx)
		return nil, fmt.Errorf("connecting: %w", err)
	}
	db.pool = pool
	return db, nil
}

func (db *database) table(name string) string { return pgx.Identifier{db.schema, name}.Sanitize() }

// progress returns how many tasks are pending or running and how many
// completion rows exist.
func (db *database) progress(ctx context.Context) (tasks, completions int, err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err = db.pool.QueryRow(ctx, fmt.Sprintf("SELECT (SELECT count(*) FROM %s), (SELECT count(*) FROM %s)",
		db.table("tasks"), db.table("completions"))).Scan(&tasks, &completions)
	if err != nil {
		return 0, 0, fmt.Errorf("reading progress: %w", err)
	}
	return tasks, completions, nil
}

// completions returns the key of every completion row.
func (db *database) completions(ctx context.Context) ([]Key, error) {
	rows, err := db.pool.Query(ctx, fmt.Sprintf("SELECT ordering_id, scheduled_at, uniqueness_key FROM %s", db.table("completions")))
	if err != nil {
		return nil, fmt.Errorf("reading completions: %w", err)
	}
	var keys []Key
	var id, uk string
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&id, &at, &uk}, func() error {
		keys = append(keys, keyOf(id, at, uk))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading completions: %w", err)
	}
	return keys, nil
}

// dead returns how many tasks ended in dead_tasks (the run retries forever,
// so any is a surprise worth printing).
func (db *database) dead(ctx context.Context) (int, error) {
	var n int
	err := db.pool.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s", db.table("dead_tasks"))).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("reading dead tasks: %w", err)
	}
	return n, nil
}

// onNewPrimary returns the ids of the nodes holding a live lease registered
// on the server's current timeline: since a failover, the nodes that are
// back.
func (db *database) onNewPrimary(ctx context.Context) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	rows, err := db.pool.Query(ctx, fmt.Sprintf("SELECT node_id FROM %s WHERE lease_expires_at > now() AND timeline = %s.timeline()",
		db.table("nodes"), pgx.Identifier{db.schema}.Sanitize()))
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}

func (db *database) close(ctx context.Context) {
	if db.pool != nil {
		db.pool.Close()
	}
	if db.standby != nil {
		_ = db.standby.Stop(ctx)
	}
	if db.pg != nil {
		_ = db.pg.Stop(ctx)
	}
}
