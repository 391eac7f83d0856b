// Package pgschedotel traces pgsched with OpenTelemetry: a pgsched.Tracer
// that stores the trace context of each enqueueing call with its tasks
// and runs each handler in a span of the same trace, linked to that call,
// with claims and outcome batches in spans of their own.
//
// It is a module of its own so that pgsched's go.mod stays free of the
// OpenTelemetry SDK: a program that does not trace never downloads it.
//
//	tr := pgschedotel.New()                                // the global TracerProvider
//	client, _ := pgsched.NewClient(pool, pgsched.ClientConfig{Tracer: tr})
//	worker, _ := pgsched.NewWorker(pool, pgsched.WorkerConfig{Tracer: tr, ...})
//
// Spans (docs/tracing.md):
//
//   - "pgsched.run <kind>", kind consumer, around each run of a handler:
//     the child of the enqueueing call's span (so Schedule and the handler
//     share one trace) and linked to it; attributes pgsched.kind,
//     pgsched.ordering_id, pgsched.task_id, pgsched.attempt and, at its
//     end, pgsched.outcome, with an error status for a retry or a dead
//     task. The handler's context carries it, so the handler's own spans
//     are its children.
//   - "pgsched.claim" and "pgsched.finish", kind client, around each claim
//     and outcome-batch statement, with pgsched.batch_size.
package pgschedotel

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/pgschedtype"
)

// ScopeName is the instrumentation scope of pgschedotel's spans.
const ScopeName = "github.com/pgsched/pgsched/pgschedotel"

// Attribute keys of pgschedotel's spans.
const (
	AttrKind       = attribute.Key("pgsched.kind")
	AttrOrderingID = attribute.Key("pgsched.ordering_id")
	AttrTaskID     = attribute.Key("pgsched.task_id")
	AttrAttempt    = attribute.Key("pgsched.attempt")
	AttrOutcome    = attribute.Key("pgsched.outcome")
	AttrBatchSize  = attribute.Key("pgsched.batch_size")
)

// Tracer is a pgsched.Tracer on OpenTelemetry.
type Tracer struct {
	tracer   trace.Tracer
	prop     propagation.TraceContext
	newTrace bool
}

var _ pgsched.Tracer = (*Tracer)(nil)

// Option configures New.
type Option func(*options)

type options struct {
	provider trace.TracerProvider
	newTrace bool
}

// WithTracerProvider makes spans with tp instead of the global provider
// (otel.GetTracerProvider at New).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.provider = tp }
}

// WithNewTrace starts each run's span as the root of a trace of its own,
// only linked to the enqueueing call's span, not its child: for tasks
// scheduled long ahead, or enqueued by one request in their thousands,
// whose runs would otherwise stretch or crowd the enqueueing trace.
func WithNewTrace() Option {
	return func(o *options) { o.newTrace = true }
}

// New returns a Tracer.
func New(opts ...Option) *Tracer {
	var o options
	for _, f := range opts {
		f(&o)
	}
	if o.provider == nil {
		o.provider = otel.GetTracerProvider()
	}
	return &Tracer{tracer: o.provider.Tracer(ScopeName), newTrace: o.newTrace}
}

// Inject returns the W3C traceparent of the span in ctx, "" for none
// (tracestate is not kept).
func (t *Tracer) Inject(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	t.prop.Inject(ctx, c)
	return c["traceparent"]
}

// remote is the span context a stored traceparent names, invalid for ""
// or anything unreadable.
func (t *Tracer) remote(traceparent string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	ctx := t.prop.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	return trace.SpanContextFromContext(ctx)
}

// StartRun starts the span of one run of job (see the package doc).
func (t *Tracer) StartRun(ctx context.Context, job *pgschedtype.Job) (context.Context, func(pgschedtype.Outcome, string)) {
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			AttrKind.String(job.Kind),
			AttrOrderingID.String(job.OrderingID),
			AttrTaskID.Int64(job.ID),
			AttrAttempt.Int(job.Attempt),
		),
	}
	if rc := t.remote(job.Traceparent); rc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: rc}))
		if !t.newTrace {
			ctx = trace.ContextWithRemoteSpanContext(ctx, rc)
		}
	}
	if t.newTrace {
		opts = append(opts, trace.WithNewRoot())
	}
	ctx, span := t.tracer.Start(ctx, "pgsched.run "+job.Kind, opts...)
	return ctx, func(outcome pgschedtype.Outcome, errMsg string) {
		span.SetAttributes(AttrOutcome.String(string(outcome)))
		if outcome == pgschedtype.OutcomeRetry || outcome == pgschedtype.OutcomeDead {
			span.SetStatus(codes.Error, errMsg)
		}
		span.End()
	}
}

// StartBatch starts the span of a claim ("claim") or outcome batch
// ("finish") statement.
func (t *Tracer) StartBatch(ctx context.Context, op string) func(int, error) {
	_, span := t.tracer.Start(ctx, "pgsched."+op, trace.WithSpanKind(trace.SpanKindClient))
	return func(n int, err error) {
		span.SetAttributes(AttrBatchSize.Int(n))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// TraceID returns the trace id a traceparent names, "" when it names none
// (for logs that point at a task's trace).
func TraceID(traceparent string) string {
	if sc := (&Tracer{}).remote(traceparent); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}
