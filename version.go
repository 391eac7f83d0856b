package pgsched

import (
	"runtime/debug"
	"strings"
)

const modulePath = "github.com/pgsched/pgsched"

// Version is the pgsched version this program was built with: the module
// version when pgsched is a dependency at a tagged version or was
// installed with `go install ...@version`, else "(devel)" followed by the
// commit (and "+dirty") when the build recorded one.
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := info.Main.Version
	if info.Main.Path != modulePath {
		v = ""
		for _, d := range info.Deps {
			if d.Path == modulePath {
				v = d.Version
				if d.Replace != nil {
					v = "(replaced)"
				}
			}
		}
	}
	if v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return "(devel)"
	}
	return "(devel) " + strings.TrimSpace(rev[:min(12, len(rev))]) + dirty
}
