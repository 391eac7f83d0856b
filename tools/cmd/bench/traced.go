package main

import (
	"context"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/pgsched/pgsched/pgschedotel"
)

// tracing is the OpenTelemetry set-up of a traced run: every span sampled
// and exported in batches, as a production set-up does, to an exporter
// that drops them, so the figure is pgsched's and the SDK's cost, not a
// collector's.
type tracing struct {
	tp     *sdktrace.TracerProvider
	tracer *pgschedotel.Tracer
}

type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

func newTracing() *tracing {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(discard{}))
	return &tracing{tp: tp, tracer: pgschedotel.New(pgschedotel.WithTracerProvider(tp))}
}

// tracedWorkload measures what tracing costs: the own-ordering_id
// burn-down untraced, then traced (the tasks enqueued inside a span by a
// Client with pgschedotel's Tracer, so each stores a traceparent, and run
// by a Worker with it: a span per run, claim and outcome batch), back to
// back in each run, and their ratio per run (the machine's speed drifts
// between runs).
func (b *bench) tracedWorkload() workload {
	return workload{[]string{"burn-traced"}, []string{
		fmt.Sprintf("burn-down %d, own ordering_id, untraced, tasks/s", b.n),
		fmt.Sprintf("burn-down %d, own ordering_id, traced (OTel), tasks/s", b.n),
		"traced / untraced burn-down, % per run",
	}, b.burnTraced}
}

func (b *bench) burnTraced(ctx context.Context) ([]float64, error) {
	plain, err := b.burn(ctx, 0)
	if err != nil {
		return nil, err
	}
	b.tracing = newTracing()
	defer func() {
		_ = b.tracing.tp.Shutdown(context.Background())
		b.tracing = nil
	}()
	traced, err := b.burn(ctx, 0)
	if err != nil {
		return nil, err
	}
	return []float64{plain, traced, 100 * traced / plain}, nil
}
