package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Requests are signed as the Standard Webhooks specification says
// (https://www.standardwebhooks.com), so a receiver verifies them with an
// existing library in its own language: the signed content is
// "<webhook-id>.<webhook-timestamp>.<body>", its HMAC-SHA256 under each
// active secret goes into webhook-signature as "v1,<base64>", space
// separated. The timestamp is inside the signed content, so a receiver
// can refuse a replay older than its tolerance; the id is the same for
// every attempt at one task, so a receiver can deduplicate.
const (
	IDHeader        = "webhook-id"
	TimestampHeader = "webhook-timestamp"
	SignatureHeader = "webhook-signature"

	// SecretPrefix starts a secret in the Standard Webhooks form:
	// whsec_ followed by the key in base64.
	SecretPrefix = "whsec_"
	// MinSecretBytes is the shortest key accepted: a shorter one could be
	// guessed.
	MinSecretBytes = 16
	// DefaultTolerance is how far from the receiver's clock Verify accepts
	// a timestamp, as the specification's reference libraries do.
	DefaultTolerance = 5 * time.Minute
)

// Errors returned by Verify.
var (
	ErrNoSignature   = errors.New("webhook: no valid signature")
	ErrTimestamp     = errors.New("webhook: timestamp outside the tolerance")
	ErrMissingHeader = errors.New("webhook: missing webhook-id, webhook-timestamp or webhook-signature")
)

// ParseSecrets parses comma-separated secrets in the Standard Webhooks
// form (whsec_<base64 key>). During a rotation two are given, the new one
// first: requests carry a signature under each, so receivers holding
// either verify them.
func ParseSecrets(s string) ([][]byte, error) {
	var keys [][]byte
	for i, raw := range strings.Split(s, ",") {
		item := strings.TrimSpace(raw)
		b64, ok := strings.CutPrefix(item, SecretPrefix)
		if !ok {
			return nil, fmt.Errorf("webhook: secret %d: want the Standard Webhooks form %s<base64 key>", i+1, SecretPrefix)
		}
		key, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("webhook: secret %d: the key after %s is not base64", i+1, SecretPrefix)
		}
		if len(key) < MinSecretBytes {
			return nil, fmt.Errorf("webhook: secret %d: the key is %d bytes, at least %d are needed", i+1, len(key), MinSecretBytes)
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// Sign returns the webhook-signature value for a message: one "v1,<base64>"
// per key, space separated.
func Sign(keys [][]byte, id string, at time.Time, body []byte) string {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = "v1," + base64.StdEncoding.EncodeToString(mac(k, id, at.Unix(), body))
	}
	return strings.Join(sigs, " ")
}

// SetHeaders sets the three Standard Webhooks headers of a request.
func SetHeaders(h http.Header, keys [][]byte, id string, at time.Time, body []byte) {
	h.Set(IDHeader, id)
	h.Set(TimestampHeader, strconv.FormatInt(at.Unix(), 10))
	h.Set(SignatureHeader, Sign(keys, id, at, body))
}

// Verify checks a received request as a receiver would: one of the
// signatures in h is body's under key, and its timestamp lies within
// tolerance of now (so a captured request replayed later is refused).
func Verify(key []byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	id, ts, sigs := h.Get(IDHeader), h.Get(TimestampHeader), h.Get(SignatureHeader)
	if id == "" || ts == "" || sigs == "" {
		return ErrMissingHeader
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %q is not a unix time", ErrTimestamp, ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: %s off", ErrTimestamp, d.Round(time.Second))
	}
	want := mac(key, id, sec, body)
	for _, s := range strings.Fields(sigs) {
		b64, ok := strings.CutPrefix(s, "v1,")
		if !ok {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return ErrNoSignature
}

func mac(key []byte, id string, unix int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write(strconv.AppendInt(nil, unix, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// MessageID is a task's webhook-id: derived from its key (ordering_id,
// scheduled_at, uniqueness_key), so every attempt at one task carries the
// same id and a receiver can tell a retry from a new task.
func MessageID(t Task) string {
	h := sha256.New()
	h.Write([]byte(t.OrderingID))
	h.Write([]byte{0})
	h.Write([]byte(t.ScheduledAt.UTC().Format(time.RFC3339Nano)))
	h.Write([]byte{0})
	h.Write([]byte(t.UniquenessKey))
	return "msg_" + base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:18])
}
