// Package pgschedtest helps test code that uses pgsched against a real
// PostgreSQL: a throwaway schema per test, assertions on what a
// transaction scheduled, and running due tasks synchronously with the
// handlers under test.
//
// Each helper takes the testing.TB it reports to and fails it on error,
// so a test reads as a list of steps:
//
//	schema := pgschedtest.Schema(t, pool)
//	client, _ := pgsched.NewClient(pool, pgsched.ClientConfig{Schema: schema})
//	// ... code under test schedules inside tx ...
//	tasks := pgschedtest.RequireScheduled(t, client, tx, "email")
//	runs := pgschedtest.WorkDue(ctx, t, pool, pgsched.WorkerConfig{Schema: schema, Handlers: handlers})
//
// Helpers run the real engine: WorkDue starts a Worker, so claims, retries
// and ordering behave as in production.
package pgschedtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/pgschedmigrate"
)

// Schema creates a schema with a new name, migrates it to this version of
// pgsched and drops it with everything in it when tb ends. Tests that each
// take their own schema can run in parallel on one database.
func Schema(tb testing.TB, pool *pgxpool.Pool) string {
	tb.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:]) // never fails on supported platforms
	schema := "pgschedtest_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	m, err := pgschedmigrate.New(ctx, pool, pgschedmigrate.Config{Schema: schema, Partitions: 8})
	if err != nil {
		tb.Fatalf("pgschedtest: %v", err)
	}
	tb.Cleanup(func() {
		defer func() { _ = m.Close() }()
		if err := m.Drop(context.Background()); err != nil {
			tb.Errorf("pgschedtest: %v", err)
		}
	})
	if err := m.Up(ctx); err != nil {
		tb.Fatalf("pgschedtest: migrating %s: %v", schema, err)
	}
	return schema
}

// Scheduled returns the pending tasks of kind ("" for every kind) that
// tx sees through client, in key order: what the transaction scheduled is
// there before it commits.
func Scheduled(tb testing.TB, client *pgsched.Client, tx pgx.Tx, kind string) []pgsched.TaskInfo {
	tb.Helper()
	tasks, err := client.ListTasksTx(context.Background(), tx, pgsched.TaskFilter{Kind: kind, State: pgsched.StatePending, Limit: 10000})
	if err != nil {
		tb.Fatalf("pgschedtest: %v", err)
	}
	return tasks
}

// RequireScheduled fails tb unless tx sees at least one pending task of
// kind, and returns them.
func RequireScheduled(tb testing.TB, client *pgsched.Client, tx pgx.Tx, kind string) []pgsched.TaskInfo {
	tb.Helper()
	tasks := Scheduled(tb, client, tx, kind)
	if len(tasks) == 0 {
		tb.Fatalf("pgschedtest: no pending task of kind %q", kind)
	}
	return tasks
}

// RequireNotScheduled fails tb if tx sees a pending task of kind.
func RequireNotScheduled(tb testing.TB, client *pgsched.Client, tx pgx.Tx, kind string) {
	tb.Helper()
	if tasks := Scheduled(tb, client, tx, kind); len(tasks) > 0 {
		tb.Fatalf("pgschedtest: %d pending tasks of kind %q, want none; first: %s at %s",
			len(tasks), kind, tasks[0].OrderingID, tasks[0].ScheduledAt.Format(time.RFC3339Nano))
	}
}

// Run is one handler run WorkDue saw finish.
type Run struct {
	Job pgsched.Job
	// Err is what the handler returned: nil when the task completed.
	Err error
}

// WorkDue runs every task due in cfg.Schema with cfg's handlers, the way
// a worker would, until no task is due or running; then it stops the
// worker and returns the runs in the order they ended. A task that fails
// runs again only if its retry falls due before then (set cfg.Retry's
// backoff short to see retries). Zero timing fields get values for tests
// (a 1s lease, 50ms polls); cfg.Handlers and TxHandlers are wrapped to
// record each run. WorkDue fails tb if the tasks do not settle before ctx
// ends or within a minute.
func WorkDue(ctx context.Context, tb testing.TB, pool *pgxpool.Pool, cfg pgsched.WorkerConfig) []Run {
	tb.Helper()
	client, err := pgsched.NewClient(pool, pgsched.ClientConfig{Schema: cfg.Schema})
	if err != nil {
		tb.Fatalf("pgschedtest: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	settled := func() bool {
		now := time.Now()
		due, err := client.ListTasks(ctx, pgsched.TaskFilter{State: pgsched.StatePending, DueBy: now, Limit: 1})
		if err != nil {
			tb.Fatalf("pgschedtest: %v", err)
		}
		running, err := client.ListTasks(ctx, pgsched.TaskFilter{State: pgsched.StateRunning, Limit: 1})
		if err != nil {
			tb.Fatalf("pgschedtest: %v", err)
		}
		return len(due) == 0 && len(running) == 0
	}
	if settled() {
		return nil
	}

	var mu sync.Mutex
	var runs []Run
	record := func(job *pgsched.Job, err error) error {
		mu.Lock()
		runs = append(runs, Run{Job: *job, Err: err})
		mu.Unlock()
		return err
	}
	handlers := make(map[string]pgsched.Handler, len(cfg.Handlers))
	for kind, h := range cfg.Handlers {
		handlers[kind] = pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error {
			return record(job, h.Work(ctx, job))
		})
	}
	txHandlers := make(map[string]pgsched.TxHandler, len(cfg.TxHandlers))
	for kind, h := range cfg.TxHandlers {
		txHandlers[kind] = pgsched.TxHandlerFunc(func(ctx context.Context, tx pgx.Tx, job *pgsched.Job) error {
			return record(job, h.WorkTx(ctx, tx, job))
		})
	}
	cfg.Handlers, cfg.TxHandlers = handlers, txHandlers
	if cfg.NodeID == "" {
		cfg.NodeID = "pgschedtest-" + cfg.Schema
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = time.Second
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 50 * time.Millisecond
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = 5 * time.Second
	}
	w, err := pgsched.NewWorker(pool, cfg)
	if err != nil {
		tb.Fatalf("pgschedtest: %v", err)
	}
	if err := w.Start(ctx); err != nil {
		tb.Fatalf("pgschedtest: starting a worker: %v", err)
	}
	defer func() {
		if err := w.Stop(context.Background()); err != nil {
			tb.Errorf("pgschedtest: stopping the worker: %v", err)
		}
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !settled() {
		select {
		case <-ctx.Done():
			tb.Fatalf("pgschedtest: tasks in %s still due or running: %v", cfg.Schema, ctx.Err())
		case <-tick.C:
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return append([]Run(nil), runs...)
}
