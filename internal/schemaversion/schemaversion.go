// Package schemaversion knows which schema version this build was made
// for: the newest goose migration it embeds. A schema that a newer build
// migrated further holds tables and functions this build does not know,
// and this build's SQL written over it would break it, so the migrator
// and the worker refuse such a schema with a NewerError.
package schemaversion

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"sync"

	"github.com/pgsched/pgsched/db"
)

// ErrNewer matches every NewerError with errors.Is.
var ErrNewer = errors.New("schema is newer than this build")

// NewerError is a schema migrated past this build.
type NewerError struct {
	Version int64  // the schema's: the newest migration in goose's version table
	Build   int64  // the newest migration this build embeds
	Upgrade string // what to upgrade, e.g. "the worker"
}

func (e *NewerError) Error() string {
	return fmt.Sprintf("schema version %d is newer than this build (%d); upgrade %s", e.Version, e.Build, e.Upgrade)
}

// Is makes errors.Is(err, ErrNewer) hold.
func (e *NewerError) Is(target error) bool { return target == ErrNewer }

// Check returns a *NewerError when version, a schema's, is past Latest().
func Check(version int64, upgrade string) error {
	if b := Latest(); version > b {
		return &NewerError{Version: version, Build: b, Upgrade: upgrade}
	}
	return nil
}

// Latest is the newest migration this build embeds.
var Latest = sync.OnceValue(func() int64 {
	names, err := fs.Glob(db.Migrations, "migrations/*.sql")
	if err != nil {
		panic(err) // a constant pattern
	}
	var latest int64
	for _, n := range names {
		base := strings.TrimPrefix(n, "migrations/")
		num, _, _ := strings.Cut(base, "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			panic(fmt.Sprintf("schemaversion: migration %s has no version number", n))
		}
		latest = max(latest, v)
	}
	return latest
})
