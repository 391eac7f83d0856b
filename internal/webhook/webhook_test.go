package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// captured is what a test server saw of one request.
type captured struct {
	method string
	path   string
	header http.Header
	body   []byte
}

// newServer starts a loopback server that records each request on the
// returned channel and answers with handler (200 when nil).
func newServer(t *testing.T, handler http.HandlerFunc) (*httptest.Server, <-chan captured) {
	t.Helper()
	reqs := make(chan captured, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		reqs <- captured{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body}
		if handler != nil {
			handler(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, reqs
}

// newExecutor returns an executor whose routes are parsed from routes.
func newExecutor(t *testing.T, routes string, mod ...func(*Config)) *Executor {
	t.Helper()
	r, err := ParseRoutes(routes)
	require.NoError(t, err)
	cfg := Config{Routes: r, Timeout: 5 * time.Second}
	for _, m := range mod {
		m(&cfg)
	}
	e, err := New(cfg)
	require.NoError(t, err)
	return e
}

func testTask(kind string) Task {
	return Task{
		OrderingID:    "acct-42",
		ScheduledAt:   time.Date(2024, 5, 1, 12, 0, 0, 123456000, time.UTC),
		UniquenessKey: "invoice-1001",
		Kind:          kind,
		Payload:       json.RawMessage(`{"to":"a@example.com","n":[1,2]}`),
		Attempt:       1,
	}
}

func recv(t *testing.T, reqs <-chan captured) captured {
	t.Helper()
	select {
	case c := <-reqs:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("server received no request")
		return captured{}
	}
}

func TestNewValidation(t *testing.T) {
	t.Parallel()

	_, err := New(Config{})
	require.ErrorContains(t, err, "no routes")

	r, err := ParseRoutes("*=http://127.0.0.1:1/")
	require.NoError(t, err)
	_, err = New(Config{Routes: r, Timeout: -time.Second})
	require.ErrorContains(t, err, "negative timeout")

	e, err := New(Config{Routes: r})
	require.NoError(t, err)
	require.Equal(t, DefaultTimeout, e.timeout)
	require.Equal(t, 30*time.Second, e.timeout)
}

func TestDeliverRouting(t *testing.T) {
	t.Parallel()

	srv, reqs := newServer(t, nil)
	e := newExecutor(t, "a="+srv.URL+"/a, b="+srv.URL+"/b, *="+srv.URL+"/any")

	for kind, path := range map[string]string{"a": "/a", "b": "/b", "c": "/any", "a.b": "/any"} {
		require.NoError(t, e.Deliver(context.Background(), testTask(kind)), kind)
		got := recv(t, reqs)
		require.Equal(t, path, got.path, kind)
		require.Equal(t, kind, got.header.Get("X-Pgsched-Kind"))
	}
}

func TestDeliverNoRoute(t *testing.T) {
	t.Parallel()

	srv, reqs := newServer(t, nil)
	e := newExecutor(t, "a="+srv.URL+"/a")

	err := e.Deliver(context.Background(), testTask("missing.kind"))
	require.ErrorIs(t, err, ErrNoRoute)
	require.ErrorContains(t, err, `"missing.kind"`)
	require.True(t, IsPermanent(err))
	var se *StatusError
	require.False(t, errors.As(err, &se))
	require.Empty(t, reqs, "nothing must be sent")
}

func TestDeliverRequestShape(t *testing.T) {
	t.Parallel()

	srv, reqs := newServer(t, nil)
	e := newExecutor(t, "email.send="+srv.URL+"/hook")

	task := testTask("email.send")
	// A non-UTC time is sent in UTC; microseconds are kept.
	task.ScheduledAt = time.Date(2024, 5, 1, 14, 0, 0, 123456000, time.FixedZone("CEST", 2*3600))
	task.Attempt = 3
	require.NoError(t, e.Deliver(context.Background(), task))

	got := recv(t, reqs)
	require.Equal(t, http.MethodPost, got.method)
	require.Equal(t, "/hook", got.path)
	require.Equal(t, "application/json", got.header.Get("Content-Type"))
	require.Equal(t, "pgsched-webhook", got.header.Get("User-Agent"))
	require.Equal(t, "email.send", got.header.Get("X-Pgsched-Kind"))
	require.Empty(t, got.header.Values("X-Pgsched-Signature"), "no signature without a secret")

	var body map[string]any
	require.NoError(t, json.Unmarshal(got.body, &body), string(got.body))
	require.Len(t, body, 6, "exactly six fields: %s", got.body)
	require.Equal(t, "acct-42", body["ordering_id"])
	require.Equal(t, "2024-05-01T12:00:00.123456Z", body["scheduled_at"])
	require.Equal(t, "invoice-1001", body["uniqueness_key"])
	require.Equal(t, "email.send", body["kind"])
	require.Equal(t, float64(3), body["attempt"])

	payload, ok := body["payload"].(map[string]any)
	require.True(t, ok, "payload must be a JSON object, got %T", body["payload"])
	require.Equal(t, map[string]any{"to": "a@example.com", "n": []any{float64(1), float64(2)}}, payload)

	ts, err := time.Parse(time.RFC3339Nano, body["scheduled_at"].(string))
	require.NoError(t, err)
	require.True(t, ts.Equal(task.ScheduledAt))
}

func TestDeliverPayloadKeptVerbatim(t *testing.T) {
	t.Parallel()

	srv, reqs := newServer(t, nil)
	e := newExecutor(t, "*="+srv.URL)

	task := testTask("k")
	task.Payload = json.RawMessage(`["<a&b>", 1.50, null]`)
	require.NoError(t, e.Deliver(context.Background(), task))
	got := recv(t, reqs)
	// Compacted, but neither re-encoded as a string nor HTML-escaped.
	require.Contains(t, string(got.body), `"payload":["<a&b>",1.50,null]`)
}

func TestDeliverEmptyPayload(t *testing.T) {
	t.Parallel()

	srv, reqs := newServer(t, nil)
	e := newExecutor(t, "*="+srv.URL)

	for _, p := range []json.RawMessage{nil, {}, json.RawMessage("  \n")} {
		task := testTask("k")
		task.Payload = p
		require.NoError(t, e.Deliver(context.Background(), task))
		got := recv(t, reqs)
		var body map[string]any
		require.NoError(t, json.Unmarshal(got.body, &body))
		require.Equal(t, map[string]any{}, body["payload"], "payload %q", p)
	}
}

func TestDeliverInvalidTask(t *testing.T) {
	t.Parallel()

	srv, reqs := newServer(t, nil)
	e := newExecutor(t, "*="+srv.URL)

	task := testTask("k")
	task.Payload = json.RawMessage(`{"unterminated":`)
	err := e.Deliver(context.Background(), task)
	require.ErrorIs(t, err, ErrInvalidTask)
	require.ErrorContains(t, err, "payload is not valid JSON")
	require.True(t, IsPermanent(err))

	err = e.Deliver(context.Background(), testTask("bad\nkind"))
	require.ErrorIs(t, err, ErrInvalidTask)
	require.True(t, IsPermanent(err))

	require.Empty(t, reqs, "nothing must be sent")
}

func TestDeliverStatusClassification(t *testing.T) {
	t.Parallel()

	tests := []struct {
		status    int
		ok        bool
		permanent bool
	}{
		{http.StatusOK, true, false},
		{http.StatusCreated, true, false},
		{http.StatusAccepted, true, false},
		{http.StatusNoContent, true, false},
		{http.StatusInternalServerError, false, false},
		{http.StatusBadGateway, false, false},
		{http.StatusServiceUnavailable, false, false},
		{http.StatusGatewayTimeout, false, false},
		{http.StatusTooManyRequests, false, false},
		{http.StatusBadRequest, false, true},
		{http.StatusUnauthorized, false, true},
		{http.StatusNotFound, false, true},
		{http.StatusConflict, false, true},
		{http.StatusUnprocessableEntity, false, true},
		{http.StatusMovedPermanently, false, false},
		{http.StatusFound, false, false},
		{http.StatusNotModified, false, false},
		{http.StatusPermanentRedirect, false, false},
	}
	for _, tc := range tests {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			t.Parallel()
			srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.status >= 300 && tc.status < 400 {
					w.Header().Set("Location", "/elsewhere")
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, "  reason from server\n")
			})
			e := newExecutor(t, "k="+srv.URL+"/hook")

			err := e.Deliver(context.Background(), testTask("k"))
			if tc.ok {
				require.NoError(t, err)
				require.False(t, IsPermanent(err))
				return
			}
			require.Error(t, err)
			var se *StatusError
			require.ErrorAs(t, err, &se)
			require.Equal(t, tc.status, se.StatusCode)
			require.Equal(t, tc.permanent, se.Permanent)
			require.Equal(t, tc.permanent, IsPermanent(err))
			require.Equal(t, "k", se.Kind)
			require.Equal(t, srv.URL, se.URL, "scheme and host only: a path or query may hold a credential")
			require.NotErrorIs(t, err, ErrNoRoute)
			if tc.status >= 300 && tc.status < 400 {
				require.Empty(t, se.Body, "a redirect's body may repeat the Location's path and query")
				require.Equal(t, srv.URL, se.Location)
			} else {
				require.Equal(t, "  reason from server\n", se.Body)
				require.ErrorContains(t, err, ": reason from server")
			}
			require.ErrorContains(t, err, http.StatusText(tc.status))
		})
	}
}

func TestDeliverDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()

	var targetHits atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/target", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/target", func(w http.ResponseWriter, r *http.Request) {
		targetHits.Add(1)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	e := newExecutor(t, "k="+srv.URL+"/hook")
	err := e.Deliver(context.Background(), testTask("k"))
	var se *StatusError
	require.ErrorAs(t, err, &se)
	require.Equal(t, http.StatusMovedPermanently, se.StatusCode)
	require.False(t, IsPermanent(err), "a redirect is retried")
	require.Zero(t, targetHits.Load(), "redirect must not be followed")
}

// TestDeliverRedirectRetriesUntilFixed: a receiver that redirects (it moved,
// or insists on https) is misconfigured, not refusing the task, so each of
// 301, 302, 307 and 308 is a retryable error that names the status and
// where the redirect points, scheme and host only; once the receiver
// answers 200 the same task is delivered.
func TestDeliverRedirectRetriesUntilFixed(t *testing.T) {
	t.Parallel()
	const location = "https://user:pw-SECRET@moved.example:8443/hooks/PATH-SECRET?token=QUERY-SECRET#FRAG-SECRET"
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			t.Parallel()
			var fixed atomic.Bool
			srv, reqs := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				if fixed.Load() {
					return
				}
				w.Header().Set("Location", location)
				w.WriteHeader(code)
				_, _ = fmt.Fprintf(w, "<a href=%q>moved</a>\n", location)
			})
			e := newExecutor(t, "k="+srv.URL+"/hook")

			err := e.Deliver(context.Background(), testTask("k"))
			var se *StatusError
			require.ErrorAs(t, err, &se)
			require.False(t, IsPermanent(err), "a redirect must not kill the task")
			require.Equal(t, "https://moved.example:8443", se.Location)
			require.Equal(t, fmt.Sprintf(
				`webhook: kind "k": POST %s: status %d %s (retryable): redirect to https://moved.example:8443 not followed; route the kind to the final URL`,
				srv.URL, code, http.StatusText(code)), err.Error())
			for _, secret := range []string{"pw-SECRET", "PATH-SECRET", "QUERY-SECRET", "FRAG-SECRET", "user"} {
				require.NotContains(t, err.Error(), secret)
			}
			require.Equal(t, "/hook", recv(t, reqs).path)

			fixed.Store(true)
			require.NoError(t, e.Deliver(context.Background(), testTask("k")))
			require.Equal(t, "/hook", recv(t, reqs).path)
		})
	}
}

// TestDeliverRedirectRelativeLocation: a relative Location is resolved
// against the route's URL, and only its scheme and host are kept.
func TestDeliverRedirectRelativeLocation(t *testing.T) {
	t.Parallel()
	for loc, want := range map[string]string{
		"/moved?token=QUERY-SECRET":            "",
		"//other.example/x?token=QUERY-SECRET": "http://other.example",
		"":                                     "",
	} {
		srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			if loc != "" {
				w.Header().Set("Location", loc)
			}
			w.WriteHeader(http.StatusTemporaryRedirect)
		})
		if want == "" && loc != "" {
			want = srv.URL
		}
		e := newExecutor(t, "k="+srv.URL+"/hook?key=ROUTE-SECRET")
		err := e.Deliver(context.Background(), testTask("k"))
		var se *StatusError
		require.ErrorAs(t, err, &se, loc)
		require.Equal(t, want, se.Location, loc)
		require.False(t, se.Permanent, loc)
		require.NotContains(t, err.Error(), "SECRET", loc)
		if want == "" {
			require.ErrorContains(t, err, "(retryable): redirects are not followed; route the kind to the final URL", loc)
		}
	}
}

func TestDeliverCustomClient(t *testing.T) {
	t.Parallel()

	var targetHits atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/target", http.StatusFound)
	})
	mux.HandleFunc("/target", func(w http.ResponseWriter, r *http.Request) {
		targetHits.Add(1)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	var roundTrips atomic.Int32
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		roundTrips.Add(1)
		return http.DefaultTransport.RoundTrip(r)
	})}
	e := newExecutor(t, "k="+srv.URL+"/hook", func(c *Config) { c.Client = client })

	err := e.Deliver(context.Background(), testTask("k"))
	var se *StatusError
	require.ErrorAs(t, err, &se)
	require.Equal(t, http.StatusFound, se.StatusCode)
	require.Equal(t, int32(1), roundTrips.Load(), "the configured client's transport is used")
	require.Zero(t, targetHits.Load(), "redirect must not be followed")
	require.Nil(t, client.CheckRedirect, "caller's client must not be modified")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestDeliverErrorBodyLimited(t *testing.T) {
	t.Parallel()

	big := strings.Repeat("x", 10<<10) + "END"
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, big)
	})
	e := newExecutor(t, "*="+srv.URL)

	err := e.Deliver(context.Background(), testTask("k"))
	var se *StatusError
	require.ErrorAs(t, err, &se)
	require.Len(t, se.Body, 4096)
	require.Equal(t, big[:4096], se.Body)
	require.NotContains(t, err.Error(), "END")
}

// blockingServer returns a server whose handler blocks until the client goes
// away or the test ends, and a channel signalled when the handler starts.
func blockingServer(t *testing.T) (*httptest.Server, <-chan struct{}) {
	t.Helper()
	release := make(chan struct{})
	started := make(chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	// Cleanups run last-in first-out: unblock handlers, then close.
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	return srv, started
}

func TestDeliverTimeout(t *testing.T) {
	t.Parallel()

	srv, _ := blockingServer(t)
	e := newExecutor(t, "*="+srv.URL, func(c *Config) { c.Timeout = 50 * time.Millisecond })

	start := time.Now()
	err := e.Deliver(context.Background(), testTask("k"))
	elapsed := time.Since(start)

	require.Error(t, err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "timed out after 50ms")
	require.False(t, IsPermanent(err), "timeouts are retryable")
	var se *StatusError
	require.False(t, errors.As(err, &se))
	require.GreaterOrEqual(t, elapsed, 50*time.Millisecond)
	require.Less(t, elapsed, 30*time.Second, "the server blocks until the test ends: only the timeout ended the call")
}

func TestDeliverCallerCancellation(t *testing.T) {
	t.Parallel()

	srv, started := blockingServer(t)
	e := newExecutor(t, "*="+srv.URL, func(c *Config) { c.Timeout = time.Minute }) // the caller cancels first

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-started
		cancel()
	}()

	start := time.Now()
	err := e.Deliver(ctx, testTask("k"))
	require.ErrorIs(t, err, context.Canceled)
	require.NotContains(t, err.Error(), "timed out")
	require.False(t, IsPermanent(err))
	require.Less(t, time.Since(start), 30*time.Second, "ended by the caller, not the minute's timeout")
}

func TestDeliverNetworkError(t *testing.T) {
	t.Parallel()

	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more

	e := newExecutor(t, "*="+url)
	err := e.Deliver(context.Background(), testTask("k"))
	require.Error(t, err)
	require.False(t, IsPermanent(err), "network errors are retryable")
	var se *StatusError
	require.False(t, errors.As(err, &se))
	require.ErrorContains(t, err, `kind "k"`)
}

func TestDeliverSignature(t *testing.T) {
	t.Parallel()

	keys := [][]byte{[]byte("a key of at least 16 bytes")}
	srv, reqs := newServer(t, nil)
	e := newExecutor(t, "*="+srv.URL, func(c *Config) { c.Secrets = keys })

	task := testTask("k")
	require.NoError(t, e.Deliver(context.Background(), task))
	got := recv(t, reqs)
	require.Equal(t, MessageID(task), got.header.Get(IDHeader))
	require.Regexp(t, `^v1,[A-Za-z0-9+/]{43}=$`, got.header.Get(SignatureHeader))
	require.NoError(t, Verify(keys[0], got.header, got.body, time.Now(), DefaultTolerance))
	require.ErrorIs(t, Verify([]byte("another key of 16 bytes"), got.header, got.body, time.Now(), DefaultTolerance), ErrNoSignature)
	require.ErrorIs(t, Verify(keys[0], got.header, append(got.body, ' '), time.Now(), DefaultTolerance), ErrNoSignature)

	// A retry of the same task: the same id, a fresh timestamp.
	task.Attempt = 2
	require.NoError(t, e.Deliver(context.Background(), task))
	again := recv(t, reqs)
	require.Equal(t, got.header.Get(IDHeader), again.header.Get(IDHeader))
	require.NoError(t, Verify(keys[0], again.header, again.body, time.Now(), DefaultTolerance))
}

func TestDeliverSecretCopied(t *testing.T) {
	t.Parallel()

	key := []byte("a key of at least 16 bytes")
	srv, reqs := newServer(t, nil)
	e := newExecutor(t, "*="+srv.URL, func(c *Config) { c.Secrets = [][]byte{key} })
	copy(key, "XXXXXXXXXX") // mutating the caller's slice must not matter

	require.NoError(t, e.Deliver(context.Background(), testTask("k")))
	got := recv(t, reqs)
	require.NoError(t, Verify([]byte("a key of at least 16 bytes"), got.header, got.body, time.Now(), DefaultTolerance))
}

func TestDeliverConcurrent(t *testing.T) {
	t.Parallel()

	srv, reqs := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	e := newExecutor(t, "*="+srv.URL, func(c *Config) { c.Secrets = [][]byte{[]byte("a key of at least 16 bytes")} })

	const n = 16
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() { errs <- e.Deliver(context.Background(), testTask("k")) }()
	}
	for i := 0; i < n; i++ {
		require.NoError(t, <-errs)
		got := recv(t, reqs)
		require.NoError(t, Verify([]byte("a key of at least 16 bytes"), got.header, got.body, time.Now(), DefaultTolerance))
	}
}

func TestIsPermanent(t *testing.T) {
	t.Parallel()

	require.False(t, IsPermanent(nil))
	require.False(t, IsPermanent(errors.New("boom")))
	require.False(t, IsPermanent(context.DeadlineExceeded))
	require.True(t, IsPermanent(ErrNoRoute))
	require.True(t, IsPermanent(ErrInvalidTask))
	require.True(t, IsPermanent(&StatusError{StatusCode: 400, Permanent: true}))
	require.False(t, IsPermanent(&StatusError{StatusCode: 503}))
	wrapped := errors.Join(errors.New("ctx"), &StatusError{StatusCode: 404, Permanent: true})
	require.True(t, IsPermanent(wrapped))
}

// TestErrorsHideURLCredentials: an error is stored with the task and shown
// by the console, so neither a refused request nor an unreachable host
// puts the URL's user info, path or query in it.
func TestErrorsHideURLCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	withCreds := func(base string) string {
		return strings.Replace(base, "http://", "http://user:pw-SECRET@", 1) + "/services/PATH-SECRET?token=QUERY-SECRET"
	}
	e := newExecutor(t, "refused="+withCreds(srv.URL)+", down="+withCreds(closed.URL))
	for _, kind := range []string{"refused", "down"} {
		err := e.Deliver(context.Background(), Task{OrderingID: "o", Kind: kind, Attempt: 1})
		require.Error(t, err)
		for _, secret := range []string{"pw-SECRET", "PATH-SECRET", "QUERY-SECRET", "user"} {
			require.NotContains(t, err.Error(), secret, kind)
		}
		require.Contains(t, err.Error(), strings.TrimPrefix(srv.URL, "http://")[:10], "the host stays, to tell where it went")
	}
}
