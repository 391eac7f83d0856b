package pgschedtype

import "context"

// Tracer is what pgsched asks of a tracing system: pgsched itself imports
// none, so a program that traces nothing carries no tracing dependency,
// and one that does plugs in an implementation such as pgschedotel's
// (OpenTelemetry). A nil Tracer (the default in ClientConfig and
// WorkerConfig) traces nothing and costs nothing: no call, no allocation,
// no extra SQL. Implementations must be safe for concurrent use.
type Tracer interface {
	// Inject returns the W3C traceparent of the span in ctx
	// ("00-<trace id>-<span id>-<flags>"), or "" when ctx has none. A
	// Client stores it with each task it enqueues under ctx.
	Inject(ctx context.Context) string
	// StartRun starts the span a task's run happens in; job.Traceparent
	// is the enqueueing call's trace context ("" for none). The handler
	// gets the returned context; end is called once the run is over, with
	// its outcome and, for a retry or dead task, the error recorded.
	StartRun(ctx context.Context, job *Job) (_ context.Context, end func(outcome Outcome, errMsg string))
	// StartBatch starts the span of one batch statement: op is "claim" or
	// "finish". end is called once it returned, with the number of tasks
	// it claimed or recorded and its error.
	StartBatch(ctx context.Context, op string) (end func(n int, err error))
}
