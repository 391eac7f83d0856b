package pgsched_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/pgschedmigrate"
)

// Enqueue tasks from Go: one now, and a later one of the same ordering_id
// that runs only after it. Enqueueing a key again updates it while it is
// pending.
func Example_schedule() {
	ctx := context.Background()
	pool, schema := connect("example_schedule") // your *pgxpool.Pool, and a schema name for pgsched
	defer pool.Close()
	defer dropSchema(pool, schema)
	if err := pgschedmigrate.Up(ctx, pool, pgschedmigrate.Config{Schema: schema}); err != nil {
		fmt.Println(err)
		return
	}

	client, err := pgsched.NewClient(pool, pgsched.ClientConfig{Schema: schema})
	if err != nil {
		fmt.Println(err)
		return
	}
	at := time.Now().Add(time.Hour).Truncate(time.Second)
	for _, t := range []pgsched.Task{
		{OrderingID: "invoice-7", ScheduledAt: at, Kind: "render", Payload: json.RawMessage(`{"format":"pdf"}`)},
		{OrderingID: "invoice-7", ScheduledAt: at.Add(time.Minute), Kind: "send"},
		{OrderingID: "invoice-7", ScheduledAt: at, Kind: "render", Payload: json.RawMessage(`{"format":"html"}`)},
	} {
		res, err := client.Schedule(ctx, t)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(t.Kind, res)
	}
	tasks, err := client.ListTasks(ctx, pgsched.TaskFilter{OrderingID: "invoice-7"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range tasks {
		fmt.Println(t.Kind, string(t.Payload), t.State)
	}
	// Output:
	// render inserted
	// send inserted
	// render updated
	// render {"format": "html"} pending
	// send {} pending
}

// Run tasks with a plain handler; the worker claims due tasks of its
// partitions and runs each at its time.
func Example_worker() {
	ctx := context.Background()
	pool, schema := connect("example_worker") // your *pgxpool.Pool, and a schema name for pgsched
	defer pool.Close()
	defer dropSchema(pool, schema)
	if err := pgschedmigrate.Up(ctx, pool, pgschedmigrate.Config{Schema: schema}); err != nil {
		fmt.Println(err)
		return
	}

	done := make(chan struct{})
	worker, err := pgsched.NewWorker(pool, pgsched.WorkerConfig{
		Schema: schema,
		Handlers: map[string]pgsched.Handler{
			"greet": pgsched.HandlerFunc(func(ctx context.Context, job *pgsched.Job) error {
				fmt.Printf("hello %s (attempt %d)\n", job.OrderingID, job.Attempt)
				close(done)
				return nil
			}),
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := worker.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = worker.Stop(ctx) }()

	client, err := pgsched.NewClient(pool, pgsched.ClientConfig{Schema: schema})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := client.Schedule(ctx, pgsched.Task{OrderingID: "world", ScheduledAt: time.Now(), Kind: "greet"}); err != nil {
		fmt.Println(err)
		return
	}
	<-done
	// Output: hello world (attempt 1)
}

// SendEmail is a task's payload as a Go type; Kind names its handler.
type SendEmail struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

func (SendEmail) Kind() string { return "send_email" }

// A typed handler receives its payload decoded; NewTask builds the task
// from the same type.
func Example_typedHandler() {
	ctx := context.Background()
	pool, schema := connect("example_typed") // your *pgxpool.Pool, and a schema name for pgsched
	defer pool.Close()
	defer dropSchema(pool, schema)
	if err := pgschedmigrate.Up(ctx, pool, pgschedmigrate.Config{Schema: schema}); err != nil {
		fmt.Println(err)
		return
	}

	done := make(chan struct{})
	worker, err := pgsched.NewWorker(pool, pgsched.WorkerConfig{
		Schema: schema,
		Handlers: map[string]pgsched.Handler{
			pgsched.KindOf[SendEmail](): pgsched.WorkArgs(func(ctx context.Context, job *pgsched.Job, email SendEmail) error {
				fmt.Printf("to %s: %s\n", email.To, email.Subject)
				close(done)
				return nil
			}),
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := worker.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = worker.Stop(ctx) }()

	client, err := pgsched.NewClient(pool, pgsched.ClientConfig{Schema: schema})
	if err != nil {
		fmt.Println(err)
		return
	}
	task, err := pgsched.NewTask("user-42", time.Now(), SendEmail{To: "ada@example.com", Subject: "Welcome"})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := client.Schedule(ctx, task); err != nil {
		fmt.Println(err)
		return
	}
	<-done
	// Output: to ada@example.com: Welcome
}

// A transactional handler's writes commit together with the task's
// completion, and an enqueue inside the caller's transaction exists only
// if that transaction commits.
func Example_txHandler() {
	ctx := context.Background()
	pool, schema := connect("example_tx") // your *pgxpool.Pool, and a schema name for pgsched
	defer pool.Close()
	defer dropSchema(pool, schema)
	if err := pgschedmigrate.Up(ctx, pool, pgschedmigrate.Config{Schema: schema}); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE "+schema+".ledger (account text, cents bigint)"); err != nil {
		fmt.Println(err)
		return
	}

	client, err := pgsched.NewClient(pool, pgsched.ClientConfig{Schema: schema})
	if err != nil {
		fmt.Println(err)
		return
	}
	// The order and its follow-up task commit together.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := client.ScheduleTx(ctx, tx, pgsched.Task{
			OrderingID: "account-1", ScheduledAt: time.Now(), Kind: "charge", Payload: json.RawMessage(`{"cents": 1250}`),
		})
		return err
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	done := make(chan struct{})
	worker, err := pgsched.NewWorker(pool, pgsched.WorkerConfig{
		Schema: schema,
		TxHandlers: map[string]pgsched.TxHandler{
			"charge": pgsched.TxHandlerFunc(func(ctx context.Context, tx pgx.Tx, job *pgsched.Job) error {
				var p struct{ Cents int64 }
				if err := json.Unmarshal(job.Payload, &p); err != nil {
					return pgsched.Permanent(err)
				}
				_, err := tx.Exec(ctx, "INSERT INTO "+schema+".ledger VALUES ($1, $2)", job.OrderingID, p.Cents)
				close(done)
				return err
			}),
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := worker.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	<-done
	// Stop waits for the running handler, so its transaction has committed.
	if err := worker.Stop(ctx); err != nil {
		fmt.Println(err)
		return
	}
	var cents int64
	if err := pool.QueryRow(ctx, "SELECT sum(cents) FROM "+schema+".ledger").Scan(&cents); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("ledger:", cents)
	// Output: ledger: 1250
}
