package schemaversion

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/db"
)

func TestLatestIsTheNewestMigration(t *testing.T) {
	t.Parallel()
	names, err := fs.Glob(db.Migrations, "migrations/*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, names)
	last := names[len(names)-1] // zero-padded: name order is version order
	require.Contains(t, last, fmt.Sprintf("/%05d_", Latest()))
}

func TestCheck(t *testing.T) {
	t.Parallel()
	require.NoError(t, Check(0, "x"))
	require.NoError(t, Check(Latest(), "x"))
	err := Check(Latest()+1, "the worker")
	require.True(t, errors.Is(err, ErrNewer))
	var ne *NewerError
	require.ErrorAs(t, err, &ne)
	require.Equal(t, Latest()+1, ne.Version)
	require.EqualError(t, err, fmt.Sprintf("schema version %d is newer than this build (%d); upgrade the worker", Latest()+1, Latest()))
}
