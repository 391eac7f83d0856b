package webhook

import (
	"encoding/base64"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The Standard Webhooks specification's published test vector: a receiver
// library verifies exactly this.
const (
	vectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorUnix   = 1614265330
	vectorBody   = `{"test": 2432232314}`
	vectorSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func vectorKeys(t *testing.T) [][]byte {
	t.Helper()
	// The vector's key is 24 bytes, above MinSecretBytes.
	keys, err := ParseSecrets(vectorSecret)
	require.NoError(t, err)
	return keys
}

func TestSignStandardWebhooksVector(t *testing.T) {
	t.Parallel()
	require.Equal(t, vectorSig, Sign(vectorKeys(t), vectorID, time.Unix(vectorUnix, 0), []byte(vectorBody)))
}

func TestVerify(t *testing.T) {
	t.Parallel()
	key := vectorKeys(t)[0]
	at := time.Unix(vectorUnix, 0)
	h := http.Header{}
	SetHeaders(h, [][]byte{key}, vectorID, at, []byte(vectorBody))
	require.Equal(t, vectorSig, h.Get(SignatureHeader))

	require.NoError(t, Verify(key, h, []byte(vectorBody), at.Add(time.Minute), DefaultTolerance))
	require.ErrorIs(t, Verify(key, h, []byte(`{"test": 1}`), at, DefaultTolerance), ErrNoSignature, "tampered body")
	require.ErrorIs(t, Verify([]byte("another key of 24 bytes!"), h, []byte(vectorBody), at, DefaultTolerance), ErrNoSignature, "wrong key")
	require.ErrorIs(t, Verify(key, h, []byte(vectorBody), at.Add(6*time.Minute), DefaultTolerance), ErrTimestamp,
		"a replay older than the tolerance is refused")
	require.ErrorIs(t, Verify(key, h, []byte(vectorBody), at.Add(-6*time.Minute), DefaultTolerance), ErrTimestamp, "from the future")

	forged := h.Clone()
	forged.Set(TimestampHeader, "1614265999") // a fresh timestamp on an old signature
	require.ErrorIs(t, Verify(key, forged, []byte(vectorBody), time.Unix(1614265999, 0), DefaultTolerance), ErrNoSignature,
		"the timestamp is signed")
	require.ErrorIs(t, Verify(key, http.Header{}, []byte(vectorBody), at, DefaultTolerance), ErrMissingHeader)
}

// TestRotation: with two secrets active, a request carries a signature
// under each, and a receiver holding either one verifies it.
func TestRotation(t *testing.T) {
	t.Parallel()
	newKey := []byte("the new key, 32 bytes long......")
	secrets := SecretPrefix + base64.StdEncoding.EncodeToString(newKey) + ", " + vectorSecret
	keys, err := ParseSecrets(secrets)
	require.NoError(t, err)
	require.Len(t, keys, 2)
	h := http.Header{}
	at := time.Unix(vectorUnix, 0)
	SetHeaders(h, keys, vectorID, at, []byte(vectorBody))
	require.Contains(t, h.Get(SignatureHeader), vectorSig)
	for _, k := range keys {
		require.NoError(t, Verify(k, h, []byte(vectorBody), at, DefaultTolerance))
	}
}

func TestParseSecrets(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "s3cret", "whsec_", "whsec_not base64!", "whsec_" + base64.StdEncoding.EncodeToString([]byte("short")), vectorSecret + ","} {
		_, err := ParseSecrets(bad)
		require.Error(t, err, "%q", bad)
		require.NotContains(t, err.Error(), "MfKQ9r8", "an error never repeats a secret")
	}
}

func TestMessageIDStableAcrossAttempts(t *testing.T) {
	t.Parallel()
	a := testTask("k")
	b := a
	b.Attempt, b.Payload = 7, []byte(`{"changed":true}`)
	require.Equal(t, MessageID(a), MessageID(b), "the same task: the same id on every attempt")
	c := a
	c.UniquenessKey = "another"
	require.NotEqual(t, MessageID(a), MessageID(c))
	require.Regexp(t, `^msg_[A-Za-z0-9_-]{24}$`, MessageID(a))
}
