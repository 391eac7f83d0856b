package webhook

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// Wildcard is the route kind that matches every kind without a route of its
// own.
const Wildcard = "*"

// Routes maps task kinds to webhook URLs. The zero value has no routes.
// Build one with [ParseRoutes]. A Routes value is immutable and safe for
// concurrent use.
type Routes struct {
	byKind   map[string]string
	fallback string // URL for "*", "" when not configured
}

// ParseRoutes parses comma-separated kind=url pairs, for example
//
//	"email.send=https://mailer/hook, *=http://fallback:8080/run"
//
// Whitespace around items, kinds and URLs is trimmed. The kind "*" matches
// every kind without its own route. Each URL must be an absolute http or
// https URL with a host. Errors name the offending item; an empty string, an
// empty item, a missing '=', an empty kind, a bad URL and a duplicate kind
// are all errors.
func ParseRoutes(s string) (Routes, error) {
	if strings.TrimSpace(s) == "" {
		return Routes{}, errors.New("webhook: no routes configured")
	}
	r := Routes{byKind: make(map[string]string)}
	seenFallback := false
	for i, raw := range strings.Split(s, ",") {
		item := strings.TrimSpace(raw)
		n := i + 1
		if item == "" {
			return Routes{}, fmt.Errorf("webhook: route item %d is empty", n)
		}
		kind, rawURL, ok := strings.Cut(item, "=")
		if !ok {
			return Routes{}, fmt.Errorf("webhook: route item %d %q: missing '=' (want kind=url)", n, redactURL(item))
		}
		kind, rawURL = strings.TrimSpace(kind), strings.TrimSpace(rawURL)
		// Errors quote the item with its URL's password hidden: they end up
		// in logs. item ends with rawURL, both being trimmed.
		shown := item[:len(item)-len(rawURL)] + redactURL(rawURL)
		if kind == "" {
			return Routes{}, fmt.Errorf("webhook: route item %d %q: empty kind", n, shown)
		}
		if err := validateURL(rawURL); err != nil {
			return Routes{}, fmt.Errorf("webhook: route item %d %q: %w", n, shown, err)
		}
		if kind == Wildcard {
			if seenFallback {
				return Routes{}, fmt.Errorf("webhook: route item %d %q: duplicate kind %q", n, shown, kind)
			}
			seenFallback = true
			r.fallback = rawURL
			continue
		}
		if _, dup := r.byKind[kind]; dup {
			return Routes{}, fmt.Errorf("webhook: route item %d %q: duplicate kind %q", n, shown, kind)
		}
		r.byKind[kind] = rawURL
	}
	return r, nil
}

func validateURL(s string) error {
	if s == "" {
		return errors.New("empty URL")
	}
	u, err := url.Parse(s)
	if err != nil {
		// url.Error repeats the URL, password included: keep only the
		// cause, and not even that when the URL may hold a password, which
		// a cause such as an invalid port can quote a piece of.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if strings.Contains(s, "@") {
			return errors.New("invalid URL")
		}
		return fmt.Errorf("invalid URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("URL %q is not an absolute http or https URL", redactURL(s))
	}
	if u.Host == "" {
		return fmt.Errorf("URL %q has no host", redactURL(s))
	}
	return nil
}

// Lookup returns the URL for kind: its own route if it has one, otherwise
// the "*" fallback. ok is false when neither exists.
func (r Routes) Lookup(kind string) (url string, ok bool) {
	if u, ok := r.byKind[kind]; ok {
		return u, true
	}
	if r.fallback != "" {
		return r.fallback, true
	}
	return "", false
}

// Len reports the number of configured routes, counting "*".
func (r Routes) Len() int {
	n := len(r.byKind)
	if r.fallback != "" {
		n++
	}
	return n
}

// String lists the routes as comma-separated kind=url pairs sorted by kind,
// each URL's password replaced by "xxxxx", for log lines.
func (r Routes) String() string {
	kinds := make([]string, 0, len(r.byKind))
	for kind := range r.byKind {
		kinds = append(kinds, kind)
	}
	sort.Strings(kinds)
	pairs := make([]string, 0, r.Len())
	if r.fallback != "" {
		pairs = append(pairs, Wildcard+"="+redactURL(r.fallback))
	}
	for _, kind := range kinds {
		pairs = append(pairs, kind+"="+redactURL(r.byKind[kind]))
	}
	return strings.Join(pairs, ",")
}

// redactURL returns s with any password replaced by "xxxxx", as
// url.URL.Redacted does; for what url.Parse cannot split into a userinfo
// (unparsable, or no "//"), everything between the first ':' after the
// scheme and the last '@' before any '?' or '#' is taken to be the
// password, so even a mistyped URL never prints one.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.Opaque == "" {
		return u.Redacted()
	}
	end := len(s)
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		end = i
	}
	at := strings.LastIndex(s[:end], "@")
	if at < 0 {
		return s
	}
	start := 0
	if i := strings.Index(s[:at], "://"); i >= 0 {
		start = i + len("://")
	}
	colon := strings.Index(s[start:at], ":")
	if colon < 0 {
		return s
	}
	return s[:start+colon+1] + "xxxxx" + s[at:]
}
