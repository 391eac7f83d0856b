package sqlschema

import (
	"errors"
	"strings"
	"testing"
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
