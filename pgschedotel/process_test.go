package pgschedotel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/pgschedotel"
)

// The test binary doubles as a worker process: with PGSCHEDOTEL_CHILD set,
// init runs a traced Worker that prints each span as a line of JSON on
// stdout (OpenTelemetry's stdout exporter) until SIGTERM.
func init() {
	if os.Getenv("PGSCHEDOTEL_CHILD") != "worker" {
		return
	}
	if err := childWorker(); err != nil {
		fmt.Fprintln(os.Stderr, "child worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func childWorker() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	exp, err := stdouttrace.New(stdouttrace.WithWriter(os.Stdout))
	if err != nil {
		return err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	pool, err := pgxpool.New(ctx, os.Getenv("CHILD_URL"))
	if err != nil {
		return err
	}
	defer pool.Close()
	cfg := workerConfig(os.Getenv("CHILD_SCHEMA"), pgschedotel.New(pgschedotel.WithTracerProvider(tp)), map[string]pgsched.Handler{
		"*": pgsched.HandlerFunc(func(context.Context, *pgsched.Job) error { return nil }),
	})
	w, err := pgsched.NewWorker(pool, cfg)
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return w.Stop(sctx)
}

// exportedSpan is the part of the stdout exporter's JSON the test reads.
type exportedSpan struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
	Links       []struct {
		SpanContext struct{ TraceID, SpanID string }
	}
	Attributes []struct {
		Key   string
		Value struct{ Value any }
	}
}

// One trace from Schedule to the handler across two processes: this one
// enqueues inside a span, a worker in another process runs the task, and
// the span it exports is in the enqueueing span's trace, its child and
// linked to it.
func TestOneTraceAcrossProcesses(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	tr := newTraced(t)
	client, err := pgsched.NewClient(db.Pool, pgsched.ClientConfig{Schema: db.Schema, Tracer: tr.tracer})
	require.NoError(t, err)
	ctx, parent := tr.tp.Tracer("test").Start(context.Background(), "checkout")
	_, err = client.Schedule(ctx, pgsched.Task{OrderingID: "order-7", ScheduledAt: time.Now(), Kind: "receipt"})
	require.NoError(t, err)
	parent.End()

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PGSCHEDOTEL_CHILD=worker", "CHILD_URL="+db.URL, "CHILD_SCHEMA="+db.Schema)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	spans := make(chan exportedSpan, 100)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var s exportedSpan
			if json.Unmarshal(sc.Bytes(), &s) == nil {
				spans <- s
			}
		}
		close(spans)
		exited <- cmd.Wait()
	}()

	deadline := time.After(pgtest.Patience(30 * time.Second))
	for {
		select {
		case s, ok := <-spans:
			require.True(t, ok, "the child exited before exporting the run's span")
			if s.Name != "pgsched.run receipt" {
				continue
			}
			want := parent.SpanContext()
			require.Equal(t, want.TraceID().String(), s.SpanContext.TraceID, "the child's run span is in the enqueueing trace")
			require.Equal(t, want.SpanID().String(), s.Parent.SpanID)
			require.Len(t, s.Links, 1)
			require.Equal(t, want.TraceID().String(), s.Links[0].SpanContext.TraceID)
			require.Equal(t, want.SpanID().String(), s.Links[0].SpanContext.SpanID)
			a := map[string]any{}
			for _, kv := range s.Attributes {
				a[kv.Key] = kv.Value.Value
			}
			require.Equal(t, "order-7", a["pgsched.ordering_id"])
			require.Equal(t, "completed", a["pgsched.outcome"])
			require.EqualValues(t, 1, a["pgsched.attempt"])
			return
		case <-deadline:
			t.Fatal("the child exported no run span in time")
		}
	}
}
