package sqlschema

import (
	"errors"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	for _, ok := range []string{"pgsched", "_x", "a1_b2", strings.Repeat("s", MaxLen)} {
		if err := Validate(ok); err != nil {
			t.Errorf("Validate(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", "1abc", "Upper", "a-b", "a.b", "a b", strings.Repeat("s", MaxLen+1)} {
		if err := Validate(bad); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Validate(%q) = %v, want ErrInvalidName", bad, err)
		}
	}
	// The longest valid name leaves room for the channel suffixes.
	if n := len(strings.Repeat("s", MaxLen) + ".assign"); n != 63 {
		t.Errorf("longest channel name is %d bytes, want 63", n)
	}
}
