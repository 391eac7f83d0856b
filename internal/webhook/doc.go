// Package webhook implements the HTTP webhook executor that the pgsched
// worker uses to run tasks without Go code: every task is delivered as an
// HTTP POST to a URL configured for the task's kind.
//
// # Routing
//
// Routes map task kinds to absolute http or https URLs. They are written as
// comma-separated kind=url pairs and parsed with [ParseRoutes]:
//
//	email.send=https://mailer.internal/hooks/send, report.build=http://reports:8080/run, *=https://fallback.internal/pgsched
//
// Whitespace around items, kinds and URLs is ignored. The kind "*" is a
// fallback that matches any kind without a route of its own. A task whose
// kind has no route (and no fallback is configured) is not delivered;
// [Executor.Deliver] returns an error matching [ErrNoRoute].
//
// # Request
//
// Each delivery is a POST whose body is a JSON object with exactly these
// fields:
//
//	{
//	  "ordering_id":    "acct-42",                          // string
//	  "scheduled_at":   "2024-05-01T12:00:00.123456Z",      // RFC 3339 with fractional seconds, UTC
//	  "uniqueness_key": "invoice-1001",                     // string
//	  "kind":           "email.send",                       // string
//	  "payload":        {"to": "a@example.com"},            // the stored JSON value itself, {} when empty
//	  "attempt":        1                                   // 1 for the first run
//	}
//
// scheduled_at is formatted with [time.RFC3339Nano] in UTC, so trailing zero
// digits of the fraction are omitted. payload is embedded as JSON (an
// object, array, …), never as a string holding JSON.
//
// The request carries these headers:
//
//	Content-Type:      application/json
//	User-Agent:        pgsched-webhook
//	X-Pgsched-Kind:    <task kind>
//	webhook-id:        msg_<from the task's key: the same on every attempt>
//	webhook-timestamp: <unix seconds of this attempt>
//	webhook-signature: v1,<base64 HMAC-SHA256> [v1,<...> during a rotation]
//
// The last three, present when secrets are configured, follow the Standard
// Webhooks specification (https://www.standardwebhooks.com): the signed
// content is "<webhook-id>.<webhook-timestamp>.<raw body>" and each
// secret is given as whsec_<base64 key>. Receivers verify with any Standard
// Webhooks library (or [Verify]) against the raw body before decoding it,
// refuse timestamps outside their tolerance (replays), and deduplicate
// retries by webhook-id.
//
// # Outcome
//
// The response status decides the outcome:
//
//   - 2xx: success, Deliver returns nil.
//   - 5xx and 429 Too Many Requests: retryable failure, a [*StatusError]
//     with Permanent false. A 429 or 503 with a Retry-After header
//     (seconds or an HTTP date) carries the wait it asks for in
//     RetryAfter, which the worker binary turns into a snooze: the task
//     runs again then without using an attempt.
//   - 3xx: retryable failure, a [*StatusError] with Permanent false whose
//     Location is the redirect target's scheme and host only (never its
//     path, query or user info, nor the response body, which tends to
//     repeat them). Redirects are never followed: following one would POST
//     the signed task to wherever a receiver points, and a 301/302 turns
//     the POST into a GET. A redirect is a receiver or route
//     misconfiguration, so the task retries with backoff until the route
//     names the final URL (or the receiver stops redirecting).
//   - Every other 4xx: permanent failure, a [*StatusError] with
//     Permanent true.
//   - Network errors, timeouts and cancellation: retryable failure (the
//     underlying error is wrapped, so errors.Is(err,
//     context.DeadlineExceeded) works for timeouts).
//   - No route for the kind: permanent, matches [ErrNoRoute].
//   - A task that cannot be encoded or sent at all (payload that is not
//     valid JSON, kind that is not a valid header value): permanent,
//     matches [ErrInvalidTask].
//
// [IsPermanent] reports whether an error from Deliver is permanent. The
// executor itself never retries; retry and dead-letter policy belong to the
// scheduler.
//
// Each request is bounded by a per-request timeout (30 seconds by default)
// on top of the caller's context. At most 4 KiB of a failed response's body
// is kept as a snippet in the error; response bodies are always drained (up
// to a bound) and closed so connections can be reused.
package webhook
