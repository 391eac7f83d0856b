package webhook

import (
	"errors"
	"fmt"
	"net/url"
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
			return Routes{}, fmt.Errorf("webhook: route item %d %q: missing '=' (want kind=url)", n, item)
		}
		kind, rawURL = strings.TrimSpace(kind), strings.TrimSpace(rawURL)
		if kind == "" {
			return Routes{}, fmt.Errorf("webhook: route item %d %q: empty kind", n, item)
		}
		if err := validateURL(rawURL); err != nil {
			return Routes{}, fmt.Errorf("webhook: route item %d %q: %w", n, item, err)
		}
		if kind == Wildcard {
			if seenFallback {
				return Routes{}, fmt.Errorf("webhook: route item %d %q: duplicate kind %q", n, item, kind)
			}
			seenFallback = true
			r.fallback = rawURL
			continue
		}
		if _, dup := r.byKind[kind]; dup {
			return Routes{}, fmt.Errorf("webhook: route item %d %q: duplicate kind %q", n, item, kind)
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
		return fmt.Errorf("invalid URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("URL %q is not an absolute http or https URL", s)
	}
	if u.Host == "" {
		return fmt.Errorf("URL %q has no host", s)
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
