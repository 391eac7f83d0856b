// Package jsonb checks JSON before PostgreSQL's jsonb sees it, so a value
// it would refuse gets an error naming the reason at the caller, not a
// failed statement later: a payload at enqueue (the client), a handler's
// output before the finish batch it rides in (one bad value would fail
// the whole batch's write).
package jsonb

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Problem says why p cannot be stored as jsonb, or "" if it can. Beyond
// JSON's own rules, jsonb refuses a \u0000 escape, an unpaired UTF-16
// surrogate escape and a number outside PostgreSQL's numeric range;
// maxDepth bounds how deeply arrays and objects may nest. One pass over
// the bytes finds them, before json.Valid, which gives up on any value
// nested 10000 levels deep.
func Problem(p []byte, maxDepth int) string {
	if !utf8.Valid(p) {
		return "is not valid UTF-8"
	}
	depth := 0
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '[' || c == '{':
			depth++
			if depth > maxDepth {
				return fmt.Sprintf("is nested more than %d levels deep", maxDepth)
			}
		case c == ']' || c == '}':
			depth--
		case c == '"':
			end, reason := scanString(p, i+1)
			if reason != "" {
				return reason
			}
			i = end
		case c == '-' || ('0' <= c && c <= '9'):
			end := i
			for end < len(p) && isNumberByte(p[end]) {
				end++
			}
			if !numericFits(p[i:end]) {
				return "has a number outside PostgreSQL's numeric range"
			}
			i = end - 1
		}
	}
	if !json.Valid(p) {
		return "is not valid JSON" + syntaxDetail(p)
	}
	return ""
}

// scanString checks the JSON string starting at p[i] (after its opening
// quote) and returns the index of its closing quote (len(p) if none).
func scanString(p []byte, i int) (int, string) {
	for ; i < len(p); i++ {
		switch p[i] {
		case '"':
			return i, ""
		case '\\':
			i++
			if i >= len(p) || p[i] != 'u' {
				continue
			}
			r, ok := hex4(p, i+1)
			if !ok {
				continue // not JSON: json.Valid says so
			}
			i += 4
			switch {
			case r == 0:
				return i, `has a \u0000 escape, which jsonb cannot store`
			case 0xD800 <= r && r < 0xDC00:
				if i+2 < len(p) && p[i+1] == '\\' && p[i+2] == 'u' {
					if lo, ok := hex4(p, i+3); ok && 0xDC00 <= lo && lo < 0xE000 {
						i += 6
						continue
					}
				}
				return i, "has an unpaired UTF-16 surrogate escape, which jsonb cannot store"
			case 0xDC00 <= r && r < 0xE000:
				return i, "has an unpaired UTF-16 surrogate escape, which jsonb cannot store"
			}
		}
	}
	return i, ""
}

func hex4(p []byte, i int) (rune, bool) {
	if i+4 > len(p) {
		return 0, false
	}
	var r rune
	for _, c := range p[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func isNumberByte(c byte) bool {
	return '0' <= c && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// numericFits reports whether PostgreSQL's numeric, which jsonb stores
// numbers as, can hold the JSON number num: at most 16383 digits after the
// decimal point (trailing zeros and a negative exponent count), its first
// significant digit at most 131071 places before it (numeric's int16
// weight counts groups of 4 digits), and an exponent under 2^30 even for
// zero (set_var_from_str in PostgreSQL's numeric.c). A token that is not a
// JSON number fits: json.Valid refuses it.
func numericFits(num []byte) bool {
	s := num
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	intEnd := 0
	for intEnd < len(s) && '0' <= s[intEnd] && s[intEnd] <= '9' {
		intEnd++
	}
	intPart, rest := s[:intEnd], s[intEnd:]
	var frac []byte
	if len(rest) > 0 && rest[0] == '.' {
		j := 1
		for j < len(rest) && '0' <= rest[j] && rest[j] <= '9' {
			j++
		}
		frac, rest = rest[1:j], rest[j:]
	}
	const expLimit = 1<<30 - 1 // INT_MAX / 2
	exp := int64(0)
	if len(rest) > 0 && (rest[0] == 'e' || rest[0] == 'E') {
		rest = rest[1:]
		neg := false
		if len(rest) > 0 && (rest[0] == '+' || rest[0] == '-') {
			neg = rest[0] == '-'
			rest = rest[1:]
		}
		if len(rest) == 0 {
			return true
		}
		for _, c := range rest {
			if c < '0' || c > '9' {
				return true
			}
			if exp = exp*10 + int64(c-'0'); exp >= expLimit {
				return false
			}
		}
		if neg {
			exp = -exp
		}
	} else if len(rest) > 0 || len(intPart) == 0 {
		return true
	}
	if int64(len(frac))-exp > 16383 {
		return false
	}
	first := -1
	for k, c := range intPart {
		if c != '0' {
			first = k
			break
		}
	}
	if first < 0 {
		for k, c := range frac {
			if c != '0' {
				first = len(intPart) + k
				break
			}
		}
	}
	if first < 0 {
		return true // zero
	}
	weight := int64(len(intPart)-1-first) + exp // of the first significant digit
	return weight <= 131071
}

// syntaxDetail says where and why p, which json.Valid refused, is not
// JSON, for the error only: NaN and Infinity, which some encoders write
// for floats (Python's json.dumps does by default), are not JSON numbers.
func syntaxDetail(p []byte) string {
	var v json.RawMessage
	var se *json.SyntaxError
	if err := json.Unmarshal(p, &v); errors.As(err, &se) {
		return fmt.Sprintf(" (at byte %d: %s)", se.Offset, se.Error())
	}
	return ""
}
