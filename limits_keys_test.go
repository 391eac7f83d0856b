package pgsched_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched"
)

// TestKeysUpTo255BytesAccepted: ordering_id, uniqueness_key, kind and
// group_key take up to 255 bytes (README, "Limits"), counted in bytes, not
// characters: values of exactly 255 bytes, in one-byte and in two-byte
// characters, store as given, from Go and from SQL alike. (One byte more
// is refused, naming the field: TestBadInput.)
func TestKeysUpTo255BytesAccepted(t *testing.T) {
	t.Parallel()
	b := setupClient(t)
	ctx := context.Background()
	at := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	// 255 bytes starting with a three-digit prefix (ordering_ids must
	// differ), in one-byte or in two-byte characters.
	ascii := func(prefix string) string { return prefix + strings.Repeat("a", 252) }
	twoByte := func(prefix string) string { return prefix + strings.Repeat("é", 126) }

	i := 0
	for _, value := range []func(string) string{ascii, twoByte} {
		for _, field := range []string{"ordering_id", "uniqueness_key", "kind", "group_key"} {
			for _, via := range []string{"go", "sql"} {
				i++
				prefix := fmt.Sprintf("%03d", i)
				v := value(prefix)
				require.Len(t, v, 255)
				task := pgsched.Task{OrderingID: "o-" + prefix, ScheduledAt: at, UniquenessKey: "u", Kind: "k"}
				switch field {
				case "ordering_id":
					task.OrderingID = v
				case "uniqueness_key":
					task.UniquenessKey = v
				case "kind":
					task.Kind = v
				case "group_key":
					task.GroupKey = v
				}
				var res string
				if via == "go" {
					r, err := b.client.Schedule(ctx, task)
					require.NoError(t, err, "%s of %d bytes via %s", field, len(v), via)
					res = string(r)
				} else {
					require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT "+b.db.Schema+".schedule($1, $2, $3, '{}', $4, group_key => nullif($5, ''))",
						task.OrderingID, task.ScheduledAt, task.UniquenessKey, task.Kind, task.GroupKey).Scan(&res),
						"%s of %d bytes via %s", field, len(v), via)
				}
				require.Equal(t, "inserted", res, "%s via %s", field, via)
				var uk, kind, group string
				require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT uniqueness_key, kind, coalesce(group_key, '') FROM "+b.db.Schema+
					".tasks WHERE ordering_id = $1", task.OrderingID).Scan(&uk, &kind, &group), "%s via %s: stored", field, via)
				require.Equal(t, task.UniquenessKey, uk)
				require.Equal(t, task.Kind, kind)
				require.Equal(t, task.GroupKey, group)
			}
		}
	}
}
