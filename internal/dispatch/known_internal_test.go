package dispatch

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/store"
)

// TestUntrackKeepsANewerJob: a task given back under one term can be
// claimed again under the next before the give-back's statement settles
// (it failed and is retried, say). Settling the old job must not forget
// the new one: reconcile would then take the running task for one a lost
// response left behind and give it back while its handler runs, so it
// could run twice.
func TestUntrackKeepsANewerJob(t *testing.T) {
	t.Parallel()
	d := &Dispatcher{known: map[int64]*Job{}}
	old := &Job{Claimed: &store.Claimed{ID: 7}, Epoch: 1}
	d.known[7] = old
	newer := &Job{Claimed: &store.Claimed{ID: 7}, Epoch: 2}
	d.known[7] = newer // claimed again under the next term

	d.untrack([]*Job{old})
	require.Same(t, newer, d.known[7], "settling the old job forgot the newer one")
	d.untrack([]*Job{newer})
	require.NotContains(t, d.known, int64(7))
}
