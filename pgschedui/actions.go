package pgschedui

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/pgsched/pgsched"
)

// Actions are enabled by Config.Token: retry and delete dead tasks (one,
// or all of a kind), pause and resume kinds and recurring schedules, and
// cancel a running task. Signing in exchanges the token for
// a cookie holding a MAC of it (HttpOnly, SameSite=Strict, scoped to the
// console); every action is a POST that must carry that cookie and a CSRF
// field, another MAC of the token, which a page of another origin cannot
// read. Both are derived from the token, so sessions need no state and a
// new token signs everyone out. The only state is the count of failed
// sign-ins, which lock their address, and after many every address, out
// for a while (throttle.go). Every POST, sign-in included, is also
// refused when the browser says it comes from another origin
// (http.CrossOriginProtection: Sec-Fetch-Site when sent, else Origin
// against Host), a check that needs no secret on the page.

const cookieName = "pgsched_console"

func (c *console) mac(purpose string) string {
	m := hmac.New(sha256.New, []byte(c.token))
	m.Write([]byte(purpose))
	return hex.EncodeToString(m.Sum(nil))
}

func (c *console) csrf() string {
	if c.token == "" {
		return ""
	}
	return c.mac("csrf")
}

func (c *console) signedIn(r *http.Request) bool {
	if c.token == "" {
		return false
	}
	ck, err := r.Cookie(cookieName)
	return err == nil && hmac.Equal([]byte(ck.Value), []byte(c.mac("session")))
}

func (c *console) signIn(w http.ResponseWriter, r *http.Request) {
	if c.token == "" {
		http.Error(w, "actions are disabled: the console has no token (PGSCHED_CONSOLE_TOKEN)", http.StatusForbidden)
		return
	}
	if !c.sameOrigin(w, r) {
		return
	}
	// Hashes of equal length compare in a time that tells nothing of the
	// token, not even its length; hashing happens before the throttle's
	// turn, which a long guess would otherwise hold up.
	guess, want := sha256.Sum256([]byte(r.PostFormValue("token"))), sha256.Sum256([]byte(c.token))
	a := c.signins.try(r.RemoteAddr, func() bool { return subtle.ConstantTimeCompare(guess[:], want[:]) == 1 })
	after := (a.wait + time.Second - 1).Truncate(time.Second) // whole seconds, rounded up
	if after > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(after/time.Second)))
	}
	switch {
	case !a.tried:
		c.logger.Debug("console sign-in refused unchecked: too many failures", "remote", r.RemoteAddr, "retry_after", after)
		http.Error(w, fmt.Sprintf("too many failed sign-ins: try again in %s", after), http.StatusTooManyRequests)
		return
	case !a.ok:
		c.logger.Warn("console sign-in refused: wrong token", "remote", r.RemoteAddr, "failures", a.failures, "locked_for", after)
		http.Error(w, "wrong token", http.StatusForbidden)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: c.mac("session"), Path: c.prefix, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	c.logger.Info("console sign-in", "remote", r.RemoteAddr)
	http.Redirect(w, r, c.back(r), http.StatusSeeOther)
}

// back is where an action returns to: the page it was posted from, when
// that is a path of the console's; anything else returns to the
// overview. The form's value is the poster's to choose, so it is held to
// a plain path under the prefix: no scheme or host; no backslash or
// control character, raw or decoded (browsers read "/\x" and "/<tab>/x"
// as "//x", another site); no empty, "." or ".." segment, decoded, as
// http.Redirect cleans the path it is given ("/ui/../\x" becomes "/\x").
func (c *console) back(r *http.Request) string {
	to := r.PostFormValue("back")
	u, err := url.Parse(to)
	if err != nil || strings.ContainsFunc(to, notInPath) || strings.ContainsFunc(u.Path, notInPath) ||
		u.Scheme != "" || u.Opaque != "" || u.User != nil || u.Host != "" || !strings.HasPrefix(u.Path, c.prefix) {
		return c.prefix
	}
	segments := strings.Split(u.Path[1:], "/")
	for i, seg := range segments {
		if seg == "." || seg == ".." || seg == "" && i < len(segments)-1 {
			return c.prefix
		}
	}
	return (&url.URL{Path: u.Path, RawPath: u.RawPath, RawQuery: u.RawQuery}).String()
}

func notInPath(r rune) bool { return r == '\\' || r < 0x20 || r == 0x7f }

// sameOrigin answers 403 to a POST a browser sends from a page of another
// origin and reports whether r may go on.
func (c *console) sameOrigin(w http.ResponseWriter, r *http.Request) bool {
	err := c.crossOrigin.Check(r)
	if err == nil {
		return true
	}
	c.logger.Warn("console request from another origin refused", "path", r.URL.Path, "origin", r.Header.Get("Origin"),
		"sec_fetch_site", r.Header.Get("Sec-Fetch-Site"), "remote", r.RemoteAddr)
	http.Error(w, "refused: "+err.Error(), http.StatusForbidden)
	return false
}

// action checks that actions are on, the request comes from the
// console's origin, is signed in and carries the CSRF field, then runs do
// and logs what it changed.
func (c *console) action(do func(ctx context.Context, r *http.Request) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		switch {
		case c.token == "":
			http.Error(w, "actions are disabled: the console has no token (PGSCHED_CONSOLE_TOKEN)", http.StatusForbidden)
			return
		case !c.sameOrigin(w, r):
			return
		case !c.signedIn(r):
			http.Error(w, "sign in with the console token first", http.StatusForbidden)
			return
		case !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(c.csrf())):
			http.Error(w, "the form's CSRF token is missing or wrong", http.StatusForbidden)
			return
		}
		ctx, cancel := c.ctx(r)
		defer cancel()
		what, err := do(ctx, r)
		if err != nil {
			c.logger.Warn("console action failed", "path", r.URL.Path, "error", err)
			http.Error(w, err.Error(), actionStatus(err))
			return
		}
		c.logger.Info("console action", "path", r.URL.Path, "changed", what, "remote", r.RemoteAddr)
		http.Redirect(w, r, c.back(r), http.StatusSeeOther)
	}
}

// actionStatus is the HTTP status of a failed action: the request's fault
// (400), a task or schedule that is not there (404), or the database's
// (503, worth trying again).
func actionStatus(err error) int {
	var bad *badRequest
	switch {
	case errors.As(err, &bad), errors.Is(err, pgsched.ErrInvalidTask):
		return http.StatusBadRequest
	case errors.Is(err, pgsched.ErrNotFound):
		return http.StatusNotFound
	}
	return http.StatusServiceUnavailable
}

func formID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PostFormValue("id"), 10, 64)
	if err != nil {
		return 0, &badRequest{fmt.Sprintf("id %q is not a task id", r.PostFormValue("id"))}
	}
	return id, nil
}

func (c *console) retryDead(ctx context.Context, r *http.Request) (string, error) {
	id, err := formID(r)
	if err != nil {
		return "", err
	}
	n, err := c.client.RetryDead(ctx, id)
	return fmt.Sprintf("dead task %d retried: %d", id, n), err
}

func (c *console) deleteDead(ctx context.Context, r *http.Request) (string, error) {
	id, err := formID(r)
	if err != nil {
		return "", err
	}
	n, err := c.client.DeleteDead(ctx, id)
	return fmt.Sprintf("dead task %d deleted: %d", id, n), err
}

func (c *console) pauseKind(ctx context.Context, r *http.Request) (string, error) {
	kind := r.PostFormValue("kind")
	fresh, err := c.client.PauseKind(ctx, kind)
	return fmt.Sprintf("kind %q paused (newly: %v)", kind, fresh), err
}

func (c *console) resumeKind(ctx context.Context, r *http.Request) (string, error) {
	kind := r.PostFormValue("kind")
	was, err := c.client.ResumeKind(ctx, kind)
	return fmt.Sprintf("kind %q resumed (was paused: %v)", kind, was), err
}

// deadFilter is the dead page's filter as posted: one kind, or every
// kind when empty, and only tasks that had died when the page was read
// (died_before, the database's time then), so a bulk action never reaches
// tasks the person did not see die.
func deadFilter(r *http.Request) (pgsched.DeadFilter, string, error) {
	before, err := time.Parse(time.RFC3339Nano, r.PostFormValue("died_before"))
	if err != nil {
		return pgsched.DeadFilter{}, "", &badRequest{fmt.Sprintf("died_before %q is not an RFC 3339 time", r.PostFormValue("died_before"))}
	}
	f := pgsched.DeadFilter{Kind: r.PostFormValue("kind"), DiedBefore: before}
	which := "of every kind"
	if f.Kind != "" {
		which = fmt.Sprintf("of kind %q", f.Kind)
	}
	return f, fmt.Sprintf("%s, died before %s", which, before.UTC().Format(time.RFC3339Nano)), nil
}

func (c *console) retryDeadKind(ctx context.Context, r *http.Request) (string, error) {
	f, which, err := deadFilter(r)
	if err != nil {
		return "", err
	}
	n, err := c.client.RetryDeadWhere(ctx, f)
	return fmt.Sprintf("%d dead tasks %s retried", n, which), err
}

func (c *console) deleteDeadKind(ctx context.Context, r *http.Request) (string, error) {
	f, which, err := deadFilter(r)
	if err != nil {
		return "", err
	}
	n, err := c.client.DeleteDeadWhere(ctx, f)
	return fmt.Sprintf("%d dead tasks %s deleted", n, which), err
}

func (c *console) cancelRunning(ctx context.Context, r *http.Request) (string, error) {
	at, err := time.Parse(time.RFC3339Nano, r.PostFormValue("scheduled_at"))
	if err != nil {
		return "", &badRequest{fmt.Sprintf("scheduled_at %q is not an RFC 3339 time", r.PostFormValue("scheduled_at"))}
	}
	k := pgsched.Key{OrderingID: r.PostFormValue("ordering_id"), ScheduledAt: at, UniquenessKey: r.PostFormValue("uniqueness_key")}
	requested, err := c.client.CancelRunning(ctx, k)
	return fmt.Sprintf("cancel of task (%q, %s, %q) requested: %v", k.OrderingID, at.UTC().Format(time.RFC3339Nano), k.UniquenessKey, requested), err
}

func (c *console) pauseRecurring(ctx context.Context, r *http.Request) (string, error) {
	name := r.PostFormValue("name")
	changed, err := c.client.PauseRecurring(ctx, name)
	return fmt.Sprintf("recurring schedule %q paused (changed: %v)", name, changed), err
}

func (c *console) resumeRecurring(ctx context.Context, r *http.Request) (string, error) {
	name := r.PostFormValue("name")
	changed, err := c.client.ResumeRecurring(ctx, name)
	return fmt.Sprintf("recurring schedule %q resumed (changed: %v)", name, changed), err
}
