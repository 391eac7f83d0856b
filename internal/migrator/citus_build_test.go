package migrator

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestForCitus: the Citus build of a file turns /*citus ...*/ comments
// into code and drops the lines marked not for Citus, single or in a
// block; everything else stays as written.
func TestForCitus(t *testing.T) {
	in := strings.Join([]string{
		"SELECT 1",
		"WHERE a = b /*citus AND p = v_one*/",
		"SET plan_cache_mode = force_generic_plan -- not on citus",
		"-- not on citus: begin",
		"CREATE VIEW single AS SELECT 1;",
		"-- not on citus: end",
		"/*citus CREATE VIEW distributed AS",
		"SELECT 2; */",
		"LAST",
	}, "\n")
	want := strings.Join([]string{
		"SELECT 1",
		"WHERE a = b AND p = v_one",
		"CREATE VIEW distributed AS",
		"SELECT 2; ",
		"LAST",
	}, "\n")
	require.Equal(t, want, forCitus(in))
	plain := "SELECT 1 /* a comment */ -- and another\n"
	require.Equal(t, plain, forCitus(plain), "other comments stay")
}
