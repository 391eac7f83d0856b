package migrator

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/db"
)

// TestVariantsAreWholeFiles: one server gets db/functions and db/views as
// written; Citus gets the same with db/citus on top, file for file. No
// file holds the other variant in comments, and none is long.
func TestVariantsAreWholeFiles(t *testing.T) {
	t.Parallel()
	files := map[bool]map[string]string{}
	for _, citus := range []bool{false, true} {
		objs, err := objects("pgsched", citus)
		require.NoError(t, err)
		files[citus] = map[string]string{}
		seenView := false
		for _, o := range objs {
			files[citus][o.name] = o.file
			if o.kind == view {
				seenView = true
			}
			require.False(t, seenView && o.kind != view, "%s after a view: functions come first", o.file)
		}
	}
	single, citus := files[false], files[true]
	require.Equal(t, "db/functions/schedule_many.sql", single["schedule_many"])
	require.Equal(t, "db/citus/functions/schedule_many.sql", citus["schedule_many"], "Citus's own schedule_many replaces it")
	require.Equal(t, "db/functions/schedule.sql", citus["schedule"], "a function Citus runs as written is shared")
	require.NotContains(t, single, "claim_due_on", "Citus's own functions are not on one server")
	require.Equal(t, "db/citus/functions/claim_due_on.sql", citus["claim_due_on"])
	require.NotContains(t, single, "custom_plans")
	require.Equal(t, "db/citus/custom_plans.sql", citus["custom_plans"])
	require.NotContains(t, single, "citus_placement")
	require.Equal(t, "db/citus/views/3_citus_placement.sql", citus["citus_placement"])

	err := fs.WalkDir(db.Objects, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(db.Objects, path)
		require.NoError(t, err)
		text := string(b)
		require.NotContains(t, text, "/*citus", "%s: the other variant lives in a file of its own", path)
		require.NotContains(t, text, "not on citus", "%s: the other variant lives in a file of its own", path)
		require.LessOrEqual(t, strings.Count(text, "\n"), 250, "%s: at most 250 lines", path)
		return nil
	})
	require.NoError(t, err)
}
