package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultTimeout is the per-request timeout used when Config.Timeout is 0.
const DefaultTimeout = 30 * time.Second

const (
	userAgent = "pgsched-webhook"
	// KindHeader is the request header that carries the task kind.
	KindHeader = "X-Pgsched-Kind"

	// maxErrorBody bounds the response body snippet kept in a StatusError.
	maxErrorBody = 4 << 10
	// maxDrain bounds how much of a response body is read and discarded so
	// the connection can be reused; larger bodies just close the connection.
	maxDrain = 64 << 10
)

var (
	// ErrNoRoute is returned (wrapped, naming the kind) by Deliver when no
	// route matches the task's kind. It is permanent.
	ErrNoRoute = errors.New("webhook: no route")

	// ErrInvalidTask is returned (wrapped, with details) by Deliver when the
	// task cannot be sent at all: its payload is not valid JSON or its kind
	// cannot be sent as a header value. It is permanent.
	ErrInvalidTask = errors.New("webhook: invalid task")
)

// Task is the task data delivered to a webhook.
type Task struct {
	OrderingID    string
	ScheduledAt   time.Time
	UniquenessKey string
	Kind          string
	// Payload is the stored JSON value. It is embedded in the request body
	// as JSON; an empty payload is sent as {}.
	Payload json.RawMessage
	// Attempt is 1 for the first run.
	Attempt int
}

// wireTask is the exact JSON shape of the request body.
type wireTask struct {
	OrderingID    string          `json:"ordering_id"`
	ScheduledAt   string          `json:"scheduled_at"`
	UniquenessKey string          `json:"uniqueness_key"`
	Kind          string          `json:"kind"`
	Payload       json.RawMessage `json:"payload"`
	Attempt       int             `json:"attempt"`
}

// Config configures an Executor.
type Config struct {
	// Routes maps task kinds to URLs; it must hold at least one route.
	Routes Routes
	// Secrets, when given, sign every request as the Standard Webhooks
	// specification says (see sign.go): a signature under each, so two can
	// be active during a rotation. Parse them with ParseSecrets.
	Secrets [][]byte
	// Timeout bounds each request, including reading the response.
	// Defaults to DefaultTimeout (30s). Negative values are rejected.
	Timeout time.Duration
	// BeforeSend, when set, is called right before each request is sent;
	// an error sends nothing and is returned (retryable). The worker
	// passes pgsched.CheckFence, so a node past its lease deadline never
	// sends.
	BeforeSend func(ctx context.Context) error
	// Client sends the requests. Defaults to a client with a dedicated,
	// pooled transport. The executor uses a shallow copy whose redirect
	// policy is replaced so that redirects are never followed; the
	// caller's client is not modified.
	Client *http.Client
}

// Executor delivers tasks to webhooks. It is safe for concurrent use.
type Executor struct {
	routes     Routes
	secrets    [][]byte
	timeout    time.Duration
	client     *http.Client
	beforeSend func(ctx context.Context) error
}

// New returns an Executor for cfg.
func New(cfg Config) (*Executor, error) {
	if cfg.Routes.Len() == 0 {
		return nil, errors.New("webhook: no routes configured")
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("webhook: negative timeout %s", cfg.Timeout)
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	var client *http.Client
	if cfg.Client != nil {
		c := *cfg.Client
		client = &c
	} else {
		client = &http.Client{Transport: defaultTransport()}
	}
	client.CheckRedirect = noRedirect
	return &Executor{
		routes:     cfg.Routes,
		secrets:    cloneKeys(cfg.Secrets),
		timeout:    timeout,
		client:     client,
		beforeSend: cfg.BeforeSend,
	}, nil
}

// cloneKeys copies the caller's keys, so changing them later changes
// nothing here.
func cloneKeys(keys [][]byte) [][]byte {
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i] = bytes.Clone(k)
	}
	return out
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func defaultTransport() *http.Transport {
	var tr *http.Transport
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		tr = dt.Clone()
	} else {
		tr = &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2:     true,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		}
	}
	// Webhook traffic goes to few hosts with many concurrent requests, so
	// keep more idle connections per host than the default of 2.
	tr.MaxIdleConns = 256
	tr.MaxIdleConnsPerHost = 64
	tr.IdleConnTimeout = 90 * time.Second
	return tr
}

// Deliver POSTs t to the URL routed for t.Kind and classifies the outcome:
// nil on 2xx; a *StatusError for any other HTTP answer (Permanent unless
// 3xx, 5xx or 429); ErrNoRoute or ErrInvalidTask (wrapped) when nothing was
// sent; otherwise a wrapped network, timeout or cancellation error, which is
// retryable. Use IsPermanent to decide between retry and failure.
func (e *Executor) Deliver(ctx context.Context, t Task) error {
	_, err := e.deliver(ctx, t, 0)
	return err
}

// DeliverAnswer is Deliver that also returns the body of a 2xx answer, its
// first max bytes and one more (so a caller sees that it was longer).
func (e *Executor) DeliverAnswer(ctx context.Context, t Task, max int) ([]byte, error) {
	return e.deliver(ctx, t, max)
}

// deliver sends t and reads up to keep+1 bytes of a 2xx answer's body.
func (e *Executor) deliver(ctx context.Context, t Task, keep int) ([]byte, error) {
	target, ok := e.routes.Lookup(t.Kind)
	if !ok {
		return nil, fmt.Errorf("%w for kind %q", ErrNoRoute, t.Kind)
	}
	if !validHeaderValue(t.Kind) {
		return nil, fmt.Errorf("%w: kind %q contains control characters", ErrInvalidTask, t.Kind)
	}
	body, err := encodeTask(t)
	if err != nil {
		return nil, err
	}

	reqCtx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()

	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("webhook: kind %q: build request: %w", t.Kind, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set(KindHeader, t.Kind)
	if len(e.secrets) > 0 {
		SetHeaders(req.Header, e.secrets, MessageID(t), time.Now(), body)
	}

	if e.beforeSend != nil {
		if err := e.beforeSend(ctx); err != nil {
			return nil, fmt.Errorf("webhook: kind %q: not sent: %w", t.Kind, err)
		}
	}
	resp, err := e.client.Do(req)
	if err != nil {
		if ctx.Err() == nil && errors.Is(reqCtx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("webhook: kind %q: request timed out after %s: %w", t.Kind, e.timeout, hideURL(err, target))
		}
		return nil, fmt.Errorf("webhook: kind %q: %w", t.Kind, hideURL(err, target))
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
		_ = resp.Body.Close()
	}()

	code := resp.StatusCode
	if code >= 200 && code <= 299 {
		if keep <= 0 {
			return nil, nil
		}
		answer, err := io.ReadAll(io.LimitReader(resp.Body, int64(keep)+1))
		if err != nil {
			// Delivered all the same: the answer is what was lost.
			return nil, nil
		}
		return answer, nil
	}
	if isRedirect(code) {
		// A redirect's body usually repeats the Location, path and query
		// included, so only the redacted target is kept.
		return nil, &StatusError{Kind: t.Kind, URL: Redact(target), StatusCode: code, Permanent: !retryableStatus(code),
			Location: redirectTarget(req.URL, resp.Header.Get("Location"))}
	}
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	se := &StatusError{
		Kind:       t.Kind,
		URL:        Redact(target),
		StatusCode: code,
		Body:       strings.ToValidUTF8(string(snippet), "?"),
		Permanent:  !retryableStatus(code),
	}
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
		se.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return nil, se
}

// MaxRetryAfter bounds the wait a Retry-After answer asks for.
const MaxRetryAfter = 24 * time.Hour

// retryAfter reads a Retry-After header, delay-seconds or an HTTP date
// (RFC 9110 10.2.3), as a wait from now, at most MaxRetryAfter; 0 when
// there is none or it cannot be read. A date in the past is a wait of a
// millisecond: the receiver asked for a wait, just not a long one.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseUint(v, 10, 32); err == nil {
		return min(time.Duration(secs)*time.Second, MaxRetryAfter)
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	return min(max(at.Sub(now), time.Millisecond), MaxRetryAfter)
}

// retryableStatus: a 3xx is the receiver's misconfiguration (a moved
// endpoint, an http-to-https redirect), which someone fixing the route
// or the receiver cures, so the task waits with backoff instead of dying
// on its first attempt.
func retryableStatus(code int) bool {
	return isRedirect(code) || code >= 500 || code == http.StatusTooManyRequests
}

func isRedirect(code int) bool { return code >= 300 && code <= 399 }

// redirectTarget resolves a Location header against the request's URL and
// redacts it like the route's URL; "" when there is none.
func redirectTarget(base *url.URL, location string) string {
	if location == "" {
		return ""
	}
	u, err := base.Parse(location)
	if err != nil {
		return "(unparsable Location)"
	}
	return Redact(u.String())
}

func encodeTask(t Task) ([]byte, error) {
	payload := t.Payload
	if len(bytes.TrimSpace(payload)) == 0 {
		payload = json.RawMessage("{}")
	} else if !json.Valid(payload) {
		return nil, fmt.Errorf("%w: kind %q: payload is not valid JSON", ErrInvalidTask, t.Kind)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// Keep the payload as close to the stored bytes as possible; HTML
	// escaping is pointless for a machine-to-machine body.
	enc.SetEscapeHTML(false)
	err := enc.Encode(wireTask{
		OrderingID:    t.OrderingID,
		ScheduledAt:   t.ScheduledAt.UTC().Format(time.RFC3339Nano),
		UniquenessKey: t.UniquenessKey,
		Kind:          t.Kind,
		Payload:       payload,
		Attempt:       t.Attempt,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: kind %q: encode: %v", ErrInvalidTask, t.Kind, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// validHeaderValue reports whether s can be sent as an HTTP header value
// (no control characters other than horizontal tab).
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// Redact reduces a URL to what logs, errors and the console may show: its
// scheme and host (with port). A webhook URL often carries its credential
// in the user info, the path (Slack, Discord) or the query (?token=), and
// the kind already names the route. What does not parse into a scheme and
// a host shows as "(webhook URL)", and so does the host of a URL with an
// '@' but no user info: a password holding a '/' ends the authority early,
// so what parses as its host may be the password's start.
func Redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.User == nil && strings.Contains(s, "@")) {
		return "(webhook URL)"
	}
	return u.Scheme + "://" + u.Host
}

// hideURL replaces the URL in an error from the HTTP client (a
// *url.Error, which keeps the path and the query) with its redaction.
func hideURL(err error, target string) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return &url.Error{Op: ue.Op, URL: Redact(target), Err: ue.Err}
	}
	return err
}

// StatusError is returned by Deliver when the webhook answered with a
// non-2xx status.
type StatusError struct {
	Kind       string // task kind
	URL        string // target URL's scheme and host only (see Redact)
	StatusCode int
	// Body holds at most the first 4 KiB of the response body (invalid
	// UTF-8 replaced by '?'); empty for a 3xx.
	Body string
	// Location is, for a 3xx, the redirect target's scheme and host only
	// (see redact), resolved against URL; empty when the answer had none.
	Location string
	// Permanent is false for 3xx, 5xx and 429, true for other 4xx.
	Permanent bool
	// RetryAfter is the wait a 429 or 503 answer's Retry-After header asks
	// for (at most MaxRetryAfter); 0 without one.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	class := "retryable"
	if e.Permanent {
		class = "permanent"
	}
	msg := fmt.Sprintf("webhook: kind %q: POST %s: status %d %s (%s)",
		e.Kind, e.URL, e.StatusCode, http.StatusText(e.StatusCode), class)
	switch {
	case isRedirect(e.StatusCode) && e.Location != "":
		msg += ": redirect to " + e.Location + " not followed; route the kind to the final URL"
	case isRedirect(e.StatusCode):
		msg += ": redirects are not followed; route the kind to the final URL"
	}
	if b := strings.TrimSpace(e.Body); b != "" {
		msg += ": " + b
	}
	return msg
}

// IsPermanent reports whether err, returned by Deliver, is a permanent
// failure that retrying cannot fix: ErrNoRoute, ErrInvalidTask, or a
// StatusError with Permanent set. It is false for nil and for network,
// timeout and cancellation errors.
func IsPermanent(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrNoRoute) || errors.Is(err, ErrInvalidTask) {
		return true
	}
	var se *StatusError
	return errors.As(err, &se) && se.Permanent
}
