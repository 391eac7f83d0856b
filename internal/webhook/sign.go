package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// SignatureHeader is the request header that carries the body signature.
const SignatureHeader = "X-Pgsched-Signature"

const signaturePrefix = "sha256="

// Sign returns the signature header value for body: "sha256=" followed by
// the lowercase hex HMAC-SHA256 of body keyed with secret.
func Sign(secret, body []byte) string {
	return signaturePrefix + hex.EncodeToString(mac(secret, body))
}

// Verify reports whether header is a valid signature of body under secret,
// as produced by [Sign]. The MAC comparison is constant-time. Verify always
// returns false for an empty secret, so a receiver with a missing secret
// does not accept forgeable signatures.
func Verify(secret, body []byte, header string) bool {
	if len(secret) == 0 {
		return false
	}
	hexSum, ok := strings.CutPrefix(strings.TrimSpace(header), signaturePrefix)
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSum)
	if err != nil {
		return false
	}
	return hmac.Equal(got, mac(secret, body))
}

func mac(secret, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write(body)
	return h.Sum(nil)
}
