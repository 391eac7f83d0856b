// Package rootmodule finds the library's module, github.com/pgsched/pgsched,
// from inside the repository.
//
// The tools are a module of their own, and the worker they build (chaos
// runs it, image packs it) is built in the library's module rather than
// through the tools module's replace directive: there its build info names
// pgsched as the main module, so the binary's -version reports the commit
// as a user's build of it does.
package rootmodule

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Path is the library's module path.
const Path = "github.com/pgsched/pgsched"

// Dir walks up from the working directory to the go.mod that declares Path
// and returns its directory.
func Dir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(data), "module "+Path+"\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory: run this inside the pgsched repository", Path)
		}
		dir = parent
	}
}
