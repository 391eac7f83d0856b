package store

import (
	"strings"
	"unicode/utf8"
)

// MaxErrorBytes bounds the error text stored with a retried or dead task:
// enough for a message and a response snippet, small enough that a batch
// of a thousand failing outcomes stays a small statement.
const MaxErrorBytes = 2048

// StorableText returns s as PostgreSQL text can hold it, at most limit
// bytes: invalid UTF-8 and NUL bytes (which text cannot hold, and which
// would make the whole outcome statement fail) become U+FFFD, and a longer
// text is cut at a character boundary and marked with "…". Handler errors
// and webhook response bodies are whatever a user's code or a remote
// server produced; what the database is sent must never depend on that.
func StorableText(s string, limit int) string {
	clean := s
	if !utf8.ValidString(clean) {
		clean = strings.ToValidUTF8(clean, "\uFFFD")
	}
	if strings.IndexByte(clean, 0) >= 0 {
		clean = strings.ReplaceAll(clean, "\x00", "\uFFFD")
	}
	if len(clean) <= limit {
		return clean
	}
	const mark = "…"
	cut := limit - len(mark)
	for cut > 0 && !utf8.RuneStart(clean[cut]) {
		cut--
	}
	return clean[:max(cut, 0)] + mark
}
