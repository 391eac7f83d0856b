package store

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestStorableText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, in, want string
		max            int
	}{
		{"plain", "boom", "boom", 100},
		{"NUL", "oops\x00boom", "oops\uFFFDboom", 100},
		{"invalid UTF-8", "bad \xff", "bad \uFFFD", 100},
		{"both", "\x00\xfe\xff", "\uFFFD\uFFFD", 100},
		{"cut at a character boundary", "ab€€", "ab…", 7},
		{"exactly max", "abcd", "abcd", 4},
		{"over max", "abcde", "a…", 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := StorableText(c.in, c.max)
			require.Equal(t, c.want, got)
			require.True(t, utf8.ValidString(got))
			require.NotContains(t, got, "\x00")
			require.LessOrEqual(t, len(got), c.max)
		})
	}
	long := StorableText(strings.Repeat("é", 5000), MaxErrorBytes)
	require.LessOrEqual(t, len(long), MaxErrorBytes)
	require.True(t, utf8.ValidString(long))
}
