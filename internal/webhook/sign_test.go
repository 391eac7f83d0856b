package webhook

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSignKnownVector(t *testing.T) {
	t.Parallel()

	// RFC 4231, test case 2.
	got := Sign([]byte("Jefe"), []byte("what do ya want for nothing?"))
	require.Equal(t, "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", got)
}

func TestVerify(t *testing.T) {
	t.Parallel()

	secret := []byte("s3cret")
	body := []byte(`{"kind":"a"}`)
	sig := Sign(secret, body)
	hexSum := strings.TrimPrefix(sig, "sha256=")

	require.True(t, Verify(secret, body, sig))
	require.True(t, Verify(secret, body, " "+sig+" "), "surrounding whitespace is ignored")

	require.False(t, Verify([]byte("wrong"), body, sig), "wrong secret")
	require.False(t, Verify(secret, []byte(`{"kind":"b"}`), sig), "tampered body")
	require.False(t, Verify(secret, body, hexSum), "missing prefix")
	require.False(t, Verify(secret, body, "sha1="+hexSum), "wrong algorithm")
	require.False(t, Verify(secret, body, sig[:len(sig)-2]), "truncated")
	require.False(t, Verify(secret, body, "sha256=zz"+hexSum[2:]), "not hex")
	require.False(t, Verify(secret, body, ""), "empty header")
	require.False(t, Verify(nil, body, Sign(nil, body)), "empty secret never verifies")
}
