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
// are all errors. They show of each URL only its scheme and host (see
// Redact): they end up in logs.
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
		switch {
		case !ok:
			return Routes{}, fmt.Errorf("webhook: route item %d %q: missing '=' (want kind=url)", n, shownItem(item))
		case strings.Contains(kind, "://"):
			// The '=' is in a URL's query: the kind is missing.
			return Routes{}, fmt.Errorf("webhook: route item %d %q: missing the kind (want kind=url)", n, Redact(item))
		}
		kind, rawURL = strings.TrimSpace(kind), strings.TrimSpace(rawURL)
		// The kind, the '=' and the spaces around them: item ends with
		// rawURL, both being trimmed.
		shown := item[:len(item)-len(rawURL)]
		if strings.ContainsAny(kind, "@?#") {
			// Hardly a kind, but the start of a URL without its scheme or
			// kind, up to a '=' in its query.
			shown = "(kind not shown)="
		}
		if rawURL != "" {
			shown += Redact(rawURL)
		}
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

// shownItem is what an error may show of a route item without '=': a
// plain word (a kind without its URL) as it is, anything else as a URL.
func shownItem(item string) string {
	if !strings.ContainsAny(item, ":/@?#%") {
		return item
	}
	return Redact(item)
}

// validateURL says what is wrong with a route's URL without quoting it.
func validateURL(s string) error {
	if s == "" {
		return errors.New("empty URL")
	}
	u, err := url.Parse(s)
	if err != nil {
		// url.Error repeats the URL: keep only the cause, and not even that
		// when the URL may hold a password, which a cause such as an
		// invalid port can quote a piece of.
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
		return errors.New("not an absolute http or https URL")
	}
	if u.Host == "" {
		return errors.New("URL has no host")
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
// each URL reduced to its scheme and host (see Redact), for log lines.
func (r Routes) String() string {
	kinds := make([]string, 0, len(r.byKind))
	for kind := range r.byKind {
		kinds = append(kinds, kind)
	}
	sort.Strings(kinds)
	pairs := make([]string, 0, r.Len())
	if r.fallback != "" {
		pairs = append(pairs, Wildcard+"="+Redact(r.fallback))
	}
	for _, kind := range kinds {
		pairs = append(pairs, kind+"="+Redact(r.byKind[kind]))
	}
	return strings.Join(pairs, ",")
}
