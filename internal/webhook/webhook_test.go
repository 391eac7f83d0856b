package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
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
