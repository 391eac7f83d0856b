package webhook

import (
	"testing"
	"time"
)

// TestRetryAfter reads both forms of Retry-After, bounds the wait, and
// takes what it cannot read as no wait at all.
func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		header string
		want   time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"120", 2 * time.Minute},
		{" 5 ", 5 * time.Second},
		{"Thu, 26 Nov 2026 12:00:30 GMT", 30 * time.Second},
		{"Thu, 26 Nov 2026 11:00:00 GMT", time.Millisecond},
		{"999999999", MaxRetryAfter},
		{"Sat, 26 Dec 2026 12:00:00 GMT", MaxRetryAfter},
		{"-5", 0},
		{"1.5", 0},
		{"soon", 0},
	} {
		if got := retryAfter(c.header, now); got != c.want {
			t.Errorf("Retry-After %q: %s, want %s", c.header, got, c.want)
		}
	}
}
