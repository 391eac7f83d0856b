package pgtest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgsched/pgsched/internal/localpg"
)

// Replicated is a primary PostgreSQL server with a streaming standby of
// its own, both private to one test, for what only a failover shows.
type Replicated struct {
	Primary, Standby *localpg.Server
}

// NewReplicated starts a primary and a streaming standby of it from the
// machine's PostgreSQL binaries (whatever TEST_DATABASE_URL says: a
// failover needs servers the test may kill). With synchronous, the
// primary's commits wait for the standby, so a promotion loses nothing;
// without, the standby lags as it may. Both stop with the test.
func NewReplicated(tb testing.TB, synchronous bool) *Replicated {
	tb.Helper()
	dir, err := os.MkdirTemp("", "pgtest-replicated-")
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	// When root, PostgreSQL runs as user postgres and must traverse this.
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithTimeout(context.Background(), localStartTimeout)
	defer cancel()
	var settings []string
	if synchronous {
		settings = []string{"synchronous_standby_names = '*'"}
	}
	r := &Replicated{}
	tb.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, s := range []*localpg.Server{r.Standby, r.Primary} {
			if s != nil {
				_ = s.Halt(sctx, localpg.Immediate) // it may be down already
				_ = s.Stop(sctx)
			}
		}
		_ = os.RemoveAll(dir)
	})
	r.Primary, err = localpg.Start(ctx, localpg.Options{DataDir: filepath.Join(dir, "primary"), Settings: settings, Logger: logger})
	if err != nil {
		tb.Fatalf("pgtest: starting the primary: %v", err)
	}
	r.Standby, err = localpg.StartStandby(ctx, r.Primary, localpg.Options{DataDir: filepath.Join(dir, "standby"), Logger: logger})
	if err != nil {
		tb.Fatalf("pgtest: starting the standby: %v", err)
	}
	return r
}

// URL is a multi-host connection string naming both servers, in pgx's
// form, that connects to whichever accepts writes.
func (r *Replicated) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		r.Primary.Port(), r.Standby.Port())
}

// StandbyFirstURL is URL with the standby named first: a client must skip
// it (it refuses writes) and use the primary.
func (r *Replicated) StandbyFirstURL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		r.Standby.Port(), r.Primary.Port())
}

// CutReplication stops the standby from receiving WAL (its primary_conninfo
// emptied), so what the primary commits from now on never reaches it: an
// asynchronous standby's lag, made as long as the test likes.
func (r *Replicated) CutReplication(tb testing.TB) {
	tb.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, r.Standby.URL())
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "ALTER SYSTEM SET primary_conninfo = ''"); err != nil {
		tb.Fatalf("pgtest: cutting replication: %v", err)
	}
	if _, err := pool.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		tb.Fatalf("pgtest: cutting replication: %v", err)
	}
	deadline := time.Now().Add(Patience(30 * time.Second))
	for {
		var receivers int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_wal_receiver").Scan(&receivers); err != nil {
			tb.Fatalf("pgtest: %v", err)
		}
		if receivers == 0 {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("pgtest: the standby still receives WAL")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Failover kills the primary as a power cut would (no checkpoint, no
// goodbye to clients) and promotes the standby; it returns when the
// standby accepts writes.
func (r *Replicated) Failover(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.Primary.Halt(ctx, localpg.Immediate); err != nil {
		tb.Fatalf("pgtest: killing the primary: %v", err)
	}
	if err := r.Standby.Promote(ctx); err != nil {
		tb.Fatalf("pgtest: promoting the standby: %v", err)
	}
}
