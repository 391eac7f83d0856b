package sqlschema

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidate(t *testing.T) {
	for _, ok := range []string{"pgsched", "_x", "a1_b2", strings.Repeat("s", MaxLen),
		// Unreserved keywords and near misses of refused names work.
		"begin", "loop", "schema", "public_x", "xpg_", "pg"} {
		if err := Validate(ok); err != nil {
			t.Errorf("Validate(%q) = %v, want nil", ok, err)
		}
	}
	for bad, why := range map[string]string{
		"": "lowercase", "1abc": "lowercase", "Upper": "lowercase", "a-b": "lowercase", "a.b": "lowercase",
		"a b": "lowercase", strings.Repeat("s", MaxLen+1): "at most",
		"select": "keyword", "order": "keyword", "between": "keyword", "json_table": "keyword",
		"public": "of its own", "information_schema": "of its own",
		"pg_catalog": "pg_", "pg_toast": "pg_", "pg_x": "pg_",
	} {
		err := Validate(bad)
		if !errors.Is(err, ErrInvalidName) || !strings.Contains(err.Error(), "schema name") || !strings.Contains(err.Error(), why) {
			t.Errorf("Validate(%q) = %v, want ErrInvalidName naming the schema and %q", bad, err, why)
		}
	}
	// The longest valid name leaves room for the channel suffixes.
	if n := len(strings.Repeat("s", MaxLen) + ".assign"); n != 63 {
		t.Errorf("longest channel name is %d bytes, want 63", n)
	}
}

// TestRewriteQualifierOnly: only the schema qualifier moves; the product's
// name in messages and names that merely start with it stay.
func TestRewriteQualifierOnly(t *testing.T) {
	t.Parallel()
	in := `RAISE EXCEPTION 'pgsched: kind is %s' USING x = pgsched.heads; SELECT pg_notify('pgsched.due', ''); pgsched_enqueue`
	want := `RAISE EXCEPTION 'pgsched: kind is %s' USING x = tenant_a.heads; SELECT pg_notify('tenant_a.due', ''); pgsched_enqueue`
	require.Equal(t, want, Rewrite(in, "tenant_a"))
	require.Equal(t, in, Rewrite(in, Default))
}
