package main

import (
	"os"
	"path/filepath"
)

// rootDataDir is the local PostgreSQL's data directory when the worker
// runs as root.
const rootDataDir = "/var/lib/pgsched/postgres"

// defaultDataDir is where the local PostgreSQL (started without
// DATABASE_URL) keeps its data unless PGSCHED_DATA_DIR says otherwise:
// inHome, the user's ~/.local/share/pgsched/postgres. As root it is
// /var/lib/pgsched/postgres instead: PostgreSQL refuses to run as root, so
// internal/localpg runs it as the user postgres, which cannot reach into
// root's home (mode 0700 on Debian and most distributions); localpg
// creates the directory there, owned by postgres, under parents it can
// search. A cluster a root worker already keeps in its home (which worked
// where the home was searchable) stays where it is.
func defaultDataDir(inHome string) string {
	if os.Geteuid() != 0 {
		return inHome
	}
	if _, err := os.Stat(filepath.Join(inHome, "PG_VERSION")); err == nil {
		return inHome
	}
	return rootDataDir
}
