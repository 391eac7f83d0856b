package pgschedotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/pgschedotel"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// ended passes every span as it ends to a channel, so a test waits for
// the span it expects instead of polling the exporter.
type ended chan sdktrace.ReadOnlySpan

func (e ended) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (e ended) OnEnd(s sdktrace.ReadOnlySpan) {
	select {
	case e <- s:
	default: // a test that stopped reading misses nothing it waits for
	}
}
func (e ended) Shutdown(context.Context) error   { return nil }
func (e ended) ForceFlush(context.Context) error { return nil }

// traced is a test's tracing: a provider exporting to memory, the
// pgschedotel Tracer on it, and the spans as they end.
type traced struct {
	tp     *sdktrace.TracerProvider
	mem    *tracetest.InMemoryExporter
	ended  ended
	tracer *pgschedotel.Tracer
}

func newTraced(t *testing.T, opts ...pgschedotel.Option) *traced {
	t.Helper()
	mem := tracetest.NewInMemoryExporter()
	e := make(ended, 10_000)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(mem), sdktrace.WithSpanProcessor(e))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &traced{tp: tp, mem: mem, ended: e, tracer: pgschedotel.New(append(opts, pgschedotel.WithTracerProvider(tp))...)}
}

// waitSpan returns the first span that ends with name, failing the test
// after within.
func (tr *traced) waitSpan(t *testing.T, name string, within time.Duration) sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case s := <-tr.ended:
			if s.Name() == name {
				return s
			}
		case <-deadline:
			t.Fatalf("no span %q ended within %s", name, within)
		}
	}
}

func attrs(s sdktrace.ReadOnlySpan) map[string]any {
	m := map[string]any{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

// workerConfig is a worker quick to start, claim and stop in a test.
func workerConfig(schema string, tracer pgsched.Tracer, handlers map[string]pgsched.Handler) pgsched.WorkerConfig {
	return pgsched.WorkerConfig{
		Schema:              schema,
		Handlers:            handlers,
		Tracer:              tracer,
		LeaseTTL:            pgtest.Patience(time.Second),
		PollInterval:        200 * time.Millisecond,
		MaintenanceInterval: 100 * time.Millisecond,
		ClusterInterval:     100 * time.Millisecond,
		DrainTimeout:        2 * time.Second,
		Retry:               pgsched.RetryPolicy{MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond},
	}
}

func startWorker(t *testing.T, pool *pgxpool.Pool, cfg pgsched.WorkerConfig) {
	t.Helper()
	w, err := pgsched.NewWorker(pool, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Patience(10*time.Second))
	defer cancel()
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
}
