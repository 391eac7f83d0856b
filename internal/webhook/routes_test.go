package webhook

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseRoutes(t *testing.T) {
	t.Parallel()

	r, err := ParseRoutes("  email.send = https://mailer.example/hook ,report=http://reports:8080/run?a=b&c=d,\t*=http://fallback.example/any  ")
	require.NoError(t, err)
	require.Equal(t, 3, r.Len())

	u, ok := r.Lookup("email.send")
	require.True(t, ok)
	require.Equal(t, "https://mailer.example/hook", u)

	// Only the first '=' separates kind from URL.
	u, ok = r.Lookup("report")
	require.True(t, ok)
	require.Equal(t, "http://reports:8080/run?a=b&c=d", u)

	// Kinds without their own route use the "*" fallback.
	u, ok = r.Lookup("something.else")
	require.True(t, ok)
	require.Equal(t, "http://fallback.example/any", u)
	u, ok = r.Lookup("")
	require.True(t, ok)
	require.Equal(t, "http://fallback.example/any", u)
}

func TestParseRoutesWithoutFallback(t *testing.T) {
	t.Parallel()

	r, err := ParseRoutes("a=http://127.0.0.1:1/a")
	require.NoError(t, err)
	require.Equal(t, 1, r.Len())

	u, ok := r.Lookup("a")
	require.True(t, ok)
	require.Equal(t, "http://127.0.0.1:1/a", u)

	u, ok = r.Lookup("b")
	require.False(t, ok)
	require.Empty(t, u)

	// Kind matching is exact.
	_, ok = r.Lookup("A")
	require.False(t, ok)
	_, ok = r.Lookup("a ")
	require.False(t, ok)
}

func TestRoutesZeroValue(t *testing.T) {
	t.Parallel()

	var r Routes
	require.Equal(t, 0, r.Len())
	u, ok := r.Lookup("anything")
	require.False(t, ok)
	require.Empty(t, u)
}

func TestParseRoutesErrors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name  string
		in    string
		wants []string // substrings of the error message
	}{
		{"empty", "", []string{"no routes"}},
		{"blank", "  \t ", []string{"no routes"}},
		{"missing equals", "a=http://x.example,just-a-kind", []string{`item 2 "just-a-kind"`, "missing '='"}},
		{"empty kind", "=http://x.example", []string{`item 1 "=http://x.example"`, "empty kind"}},
		{"blank kind", "  = http://x.example", []string{`item 1 "= http://x.example"`, "empty kind"}},
		{"empty url", "a=", []string{`item 1 "a="`, "empty URL"}},
		{"ftp url", "a=ftp://x.example/f", []string{`item 1 "a=ftp://x.example"`, "not an absolute http or https URL"}},
		{"relative url", "a=/hooks/a", []string{`item 1 "a=(webhook URL)"`, "not an absolute http or https URL"}},
		{"no scheme", "a=x.example/hook", []string{`item 1 "a=(webhook URL)"`, "not an absolute http or https URL"}},
		{"no host", "a=http:///path", []string{`item 1 "a=(webhook URL)"`, "no host"}},
		{"unparsable url", "a=http://x.example/%zz", []string{`item 1 "a=(webhook URL)"`, "invalid URL"}},
		{"duplicate kind", "a=http://x.example, b=http://y.example , a=http://z.example/p", []string{`item 3 "a=http://z.example"`, `duplicate kind "a"`}},
		{"duplicate after trim", "a=http://x.example, a =http://z.example", []string{`item 2 "a =http://z.example"`, `duplicate kind "a"`}},
		{"duplicate wildcard", "*=http://x.example,*=http://y.example", []string{`item 2 "*=http://y.example"`, `duplicate kind "*"`}},
		{"empty item", "a=http://x.example,,b=http://y.example", []string{"item 2 is empty"}},
		{"trailing comma", "a=http://x.example,", []string{"item 2 is empty"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := ParseRoutes(tc.in)
			require.Error(t, err)
			for _, w := range tc.wants {
				require.Contains(t, err.Error(), w)
			}
			require.Equal(t, 0, r.Len(), "no partial routes on error")
		})
	}
}

// TestParseRoutesErrorsHideSecrets: a route error shows of its URL only
// the scheme and host, never the user, password, path or query, which may
// each be the webhook's credential; nor a host that may be a password's
// start.
func TestParseRoutesErrorsHideSecrets(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name  string
		in    string
		wants []string
	}{
		{"bad scheme", "a=ftp://user:s3cret@x.example/PATH?token=TOKEN", []string{`item 1 "a=ftp://x.example"`, "not an absolute http or https URL"}},
		{"unparsable", "a=http://user:s3cret@x.example/PATH/%zz?token=TOKEN", []string{`item 1 "a=(webhook URL)"`, "invalid URL"}},
		{"slash in password", "a=http://user:s3/cret@x.example/", []string{`"a=(webhook URL)"`, "invalid URL"}},
		{"numeric password with slash", "a=ftp://user:123/s3cret@x.example/", []string{`"a=(webhook URL)"`, "not an absolute"}},
		{"no scheme", "a=user:s3cret@x.example/PATH", []string{`"a=(webhook URL)"`, "not an absolute"}},
		{"no host", "a=http://user:s3cret@/PATH?token=TOKEN", []string{`"a=(webhook URL)"`, "no host"}},
		{"missing equals", "https://user:s3cret@x.example/PATH", []string{`item 1 "https://x.example"`, "missing '='"}},
		{"missing kind", "https://user:s3cret@x.example/PATH?token=TOKEN", []string{`item 1 "https://x.example"`, "missing the kind"}},
		{"missing kind and scheme", "user:s3cret@x.example/PATH?token=TOKEN", []string{`item 1 "(kind not shown)=(webhook URL)"`, "not an absolute"}},
		{"empty kind", "=https://user:s3cret@x.example/PATH", []string{`"=https://x.example"`, "empty kind"}},
		{"duplicate", "a=http://x.example,a=https://user:s3cret@y.example:8443/PATH?token=TOKEN", []string{`item 2 "a=https://y.example:8443"`, "duplicate"}},
		{"duplicate wildcard", "*=http://x.example, * = https://user:s3cret@y.example/PATH", []string{`item 2 "* = https://y.example"`, "duplicate"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseRoutes(tc.in)
			require.Error(t, err)
			for _, secret := range []string{"s3", "user", "PATH", "TOKEN", "123"} {
				require.NotContains(t, err.Error(), secret)
			}
			for _, w := range tc.wants {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestRoutesString(t *testing.T) {
	t.Parallel()

	r, err := ParseRoutes("b=https://bob:s3cret@b.example:8443/hook?x=1, a.b=http://ab.example, *=http://any:pw@fallback.example/T0/B0/SECRET, a=http://token@a.example")
	require.NoError(t, err)
	require.Equal(t, "*=http://fallback.example,a=http://a.example,a.b=http://ab.example,b=https://b.example:8443", r.String())
	// The redacted form still parses into the same routes.
	again, err := ParseRoutes(r.String())
	require.NoError(t, err)
	require.Equal(t, r.Len(), again.Len())
	// Lookup still gives the real URL.
	u, ok := r.Lookup("b")
	require.True(t, ok)
	require.Equal(t, "https://bob:s3cret@b.example:8443/hook?x=1", u)

	require.Equal(t, "", Routes{}.String())
}
