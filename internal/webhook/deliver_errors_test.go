package webhook

import (
	"context"
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
