package pgschedui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
	"github.com/pgsched/pgsched/internal/pgtest"
	"github.com/pgsched/pgsched/pgschedui"
)

const testToken = "a-console-token-of-32-bytes-long"

// post sends form to h at path, as a browser's form would, with headers
// and cookies, and returns the response without following a redirect.
func post(h http.Handler, path string, form url.Values, headers map[string]string, cookies ...*http.Cookie) *http.Response {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

// signIn signs in to h with the right token and returns the session cookie.
func signIn(t *testing.T, h http.Handler) []*http.Cookie {
	t.Helper()
	resp := post(h, "/ui/signin", url.Values{"token": {testToken}}, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.NotEmpty(t, resp.Cookies())
	return resp.Cookies()
}

// TestConsoleRedirectsOnlyWithinPrefix: after signing in or acting, the
// console returns to the form's back path only when it is a plain path
// under its prefix; anything that could lead a browser to another site
// returns to the overview.
func TestConsoleRedirectsOnlyWithinPrefix(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	h, err := pgschedui.New(db.Pool, pgschedui.Config{Schema: db.Schema, Token: testToken})
	require.NoError(t, err)
	session := signIn(t, h)
	for back, want := range map[string]string{
		// Pages of the console: kept, query and all.
		"/ui/":                "/ui/",
		"/ui/dead":            "/ui/dead",
		"/ui/dead/":           "/ui/dead/",
		"/ui/dead?kind=email": "/ui/dead?kind=email",
		"/ui/tasks/key?ordering_id=a+b&scheduled_at=2026-01-02T03%3A04%3A05Z": "/ui/tasks/key?ordering_id=a+b&scheduled_at=2026-01-02T03%3A04%3A05Z",
		// Anything else: the overview.
		"":                            "/ui/",
		"/ui":                         "/ui/",
		"/uix/":                       "/ui/",
		"/metrics":                    "/ui/",
		"ui/dead":                     "/ui/",
		"//evil.com":                  "/ui/",
		"//evil.com/ui/":              "/ui/",
		"///evil.com":                 "/ui/",
		`/\evil.com`:                  "/ui/",
		`\\evil.com`:                  "/ui/",
		`/ui/../\evil.com`:            "/ui/",
		`/ui/\evil.com`:               "/ui/",
		"/ui/..//evil.com":            "/ui/",
		"/ui//evil.com":               "/ui/",
		"/ui/./dead":                  "/ui/",
		"/ui/x/../../..//evil.com":    "/ui/",
		"/ui/%2e%2e/":                 "/ui/",
		"/ui/%2E%2E/%2E%2E//evil.com": "/ui/",
		"/ui/%5cevil.com":             "/ui/",
		"/ui/%5C%5Cevil.com":          "/ui/",
		"/ui/..%5cevil.com":           "/ui/",
		"/ui/%2f%2fevil.com":          "/ui/",
		"/ui/\t/evil.com":             "/ui/",
		"/\t/evil.com":                "/ui/",
		"/ui/%09/evil.com":            "/ui/",
		"/ui/%00":                     "/ui/",
		"https://evil.com/ui/":        "/ui/",
		"https:/ui/":                  "/ui/",
		"https:evil.com":              "/ui/",
		"javascript:alert(1)":         "/ui/",
		"//user@evil.com/ui/":         "/ui/",
	} {
		for _, path := range []string{"/ui/signin", "/ui/kinds/resume"} {
			form := url.Values{"back": {back}}
			if path == "/ui/signin" {
				form.Set("token", testToken)
			} else {
				form.Set("kind", "email")
				form.Set("csrf", pgschedui.CSRF(h))
			}
			resp := post(h, path, form, nil, session...)
			require.Equal(t, http.StatusSeeOther, resp.StatusCode, "%s back=%q", path, back)
			loc := resp.Header.Get("Location")
			require.Equal(t, want, loc, "%s back=%q", path, back)
			u, err := url.Parse(loc)
			require.NoError(t, err)
			require.Empty(t, u.Scheme+u.Host, "%s back=%q: %s", path, back, loc)
			require.True(t, strings.HasPrefix(loc, "/ui/") && !strings.ContainsAny(loc, `\`), "%s back=%q: %s", path, back, loc)
		}
	}
}

// TestConsoleRefusesCrossOriginPosts: a signed-in POST with the right
// CSRF field is still refused (403) when the browser says it comes from a
// page of another origin, and changes nothing; from the console's own
// origin, or from a client sending neither header, it acts.
func TestConsoleRefusesCrossOriginPosts(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	h, err := pgschedui.New(db.Pool, pgschedui.Config{Schema: db.Schema, Token: testToken})
	require.NoError(t, err)
	session := signIn(t, h)
	// httptest.NewRequest's Host is example.com.
	for name, tc := range map[string]struct {
		headers map[string]string
		status  int
	}{
		"other origin":              {map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		"other port":                {map[string]string{"Origin": "http://example.com:8080"}, http.StatusForbidden},
		"host as a prefix":          {map[string]string{"Origin": "http://example.com.evil.example"}, http.StatusForbidden},
		"opaque origin":             {map[string]string{"Origin": "null"}, http.StatusForbidden},
		"cross-site fetch":          {map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		"same-site fetch":           {map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://sub.example.com"}, http.StatusForbidden},
		"cross-site, origin forged": {map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://example.com"}, http.StatusForbidden},
		"own origin":                {map[string]string{"Origin": "http://example.com"}, http.StatusSeeOther},
		"same-origin fetch":         {map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://example.com"}, http.StatusSeeOther},
		"typed address":             {map[string]string{"Sec-Fetch-Site": "none"}, http.StatusSeeOther},
		"no browser headers":        {nil, http.StatusSeeOther},
	} {
		resp := post(h, "/ui/kinds/pause", url.Values{"kind": {name}, "csrf": {pgschedui.CSRF(h)}, "back": {"/ui/kinds"}}, tc.headers, session...)
		require.Equal(t, tc.status, resp.StatusCode, name)
	}
	client, err := pgsched.NewClient(db.Pool, pgsched.ClientConfig{Schema: db.Schema})
	require.NoError(t, err)
	paused, err := client.PausedKinds(context.Background())
	require.NoError(t, err)
	var kinds []string
	for _, k := range paused {
		kinds = append(kinds, k.Kind)
	}
	require.ElementsMatch(t, []string{"own origin", "same-origin fetch", "typed address", "no browser headers"}, kinds,
		"only the same-origin pauses changed the database")

	// Sign-in too: the right token from another origin gets no session.
	resp := post(h, "/ui/signin", url.Values{"token": {testToken}}, map[string]string{"Origin": "https://evil.example"})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Empty(t, resp.Cookies())
}

// TestConsoleThrottlesSignIn: after a few wrong tokens from one address,
// its sign-ins are refused (429, Retry-After), the right token included,
// for a time that doubles with each further failure up to a bound; other
// addresses sign in meanwhile, until wrong tokens from many addresses
// lock everyone out for a while. The right token works again once the
// time is up. Failures are logged without what was guessed. The console's
// clock is the test's, so no lock-out is waited out.
func TestConsoleThrottlesSignIn(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	h, err := pgschedui.New(pgtest.AdminPool(t), pgschedui.Config{Token: testToken,
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pgschedui.SetSignInClock(h, func() time.Time { return now })
	guesses, compared := 0, 0 // wrong tokens sent, and answered "wrong token"
	signInFrom := func(addr string, right bool) *http.Response {
		token := testToken
		if !right {
			guesses++
			token = fmt.Sprintf("wrong-guess-%d", guesses)
		}
		req := httptest.NewRequest(http.MethodPost, "/ui/signin", strings.NewReader(url.Values{"token": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = addr
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if !right && rec.Code == http.StatusForbidden {
			compared++
		}
		return rec.Result()
	}
	refused := func(resp *http.Response, status int, retryAfter string, msg string) {
		t.Helper()
		require.Equal(t, status, resp.StatusCode, msg)
		require.Equal(t, retryAfter, resp.Header.Get("Retry-After"), msg)
		require.Empty(t, resp.Cookies(), msg)
	}

	const attacker = "203.0.113.7:40000"
	for i := range 5 {
		refused(signInFrom(attacker, false), http.StatusForbidden, "", fmt.Sprintf("free failure %d", i+1))
	}
	refused(signInFrom(attacker, false), http.StatusForbidden, "1", "the 6th failure locks out for 1s")
	refused(signInFrom(attacker, true), http.StatusTooManyRequests, "1", "the right token, locked out")
	refused(signInFrom("203.0.113.7:40001", true), http.StatusTooManyRequests, "1", "another port of the address")
	require.Equal(t, http.StatusSeeOther, signInFrom("198.51.100.9:1", true).StatusCode, "another address signs in")
	// Each failure after a lock-out doubles it, up to 10 minutes; until
	// its last second, every sign-in is refused.
	wait := time.Second
	for _, want := range []string{"2", "4", "8", "16", "32", "64", "128", "256", "512", "600", "600"} {
		now = now.Add(wait - time.Second)
		refused(signInFrom(attacker, false), http.StatusTooManyRequests, "1", "a second before the lock-out's end")
		now = now.Add(time.Second)
		resp := signInFrom(attacker, false)
		refused(resp, http.StatusForbidden, want, "the next failure")
		n, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		require.NoError(t, err)
		wait = time.Duration(n) * time.Second
	}
	now = now.Add(wait)
	require.Equal(t, http.StatusSeeOther, signInFrom(attacker, true).StatusCode, "the right token once the time is up")
	refused(signInFrom(attacker, false), http.StatusForbidden, "", "signing in forgot the address's failures")

	// An hour later, wrong tokens from 50 addresses, one each, are free;
	// the 51st locks every address out, for a second at first.
	now = now.Add(time.Hour)
	for i := range 50 {
		refused(signInFrom(fmt.Sprintf("10.0.%d.%d:1", i/256, i%256), false), http.StatusForbidden, "", fmt.Sprintf("address %d", i))
	}
	refused(signInFrom("10.1.0.0:1", false), http.StatusForbidden, "1", "the 51st failure")
	refused(signInFrom("192.0.2.200:1", true), http.StatusTooManyRequests, "1", "everyone is locked out")
	now = now.Add(time.Second)
	require.Equal(t, http.StatusSeeOther, signInFrom("192.0.2.200:1", true).StatusCode, "after the lock-out")

	// Each wrong token is logged, with its address, never its value.
	var failures int
	for line := range strings.Lines(logs.String()) {
		var rec struct{ Msg, Remote string }
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		if rec.Msg == "console sign-in refused: wrong token" {
			failures++
			require.NotEmpty(t, rec.Remote)
		}
	}
	require.Equal(t, compared, failures, "a log line for each wrong token compared")
	require.NotContains(t, logs.String(), "wrong-guess")
	require.NotContains(t, logs.String(), testToken)
}
