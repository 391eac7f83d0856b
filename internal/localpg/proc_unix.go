//go:build unix

package localpg

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// serverOSUser is the account PostgreSQL runs as when we are root.
const serverOSUser = "postgres"

// osUser is the unprivileged account the PostgreSQL binaries run as.
type osUser struct {
	name   string
	home   string
	uid    uint32
	gid    uint32
	groups []uint32
}

// serverUser returns nil when the binaries can run as the current user, or
// the postgres account when we are root (initdb and postgres refuse root).
func serverUser() (*osUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(serverOSUser)
	if err != nil {
		return nil, fmt.Errorf("localpg: running as root, so PostgreSQL must run as OS user %q, but looking it up failed "+
			"(install Debian's `postgresql` package, which creates it, or run as a non-root user): %w", serverOSUser, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("localpg: uid of %q: %w", serverOSUser, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("localpg: gid of %q: %w", serverOSUser, err)
	}
	ou := &osUser{name: u.Username, home: u.HomeDir, uid: uint32(uid), gid: uint32(gid)}
	if ids, err := u.GroupIds(); err == nil {
		for _, id := range ids {
			if g, err := strconv.ParseUint(id, 10, 32); err == nil {
				ou.groups = append(ou.groups, uint32(g))
			}
		}
	}
	return ou, nil
}

func (u *osUser) apply(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups},
	}
	env := os.Environ()
	env = append(env, "HOME="+u.home, "USER="+u.name, "LOGNAME="+u.name)
	cmd.Env = env // later entries win in os/exec
}

// own makes u the owner of dir and, if it was not already, of everything in it.
func (u *osUser) own(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("localpg: stat data dir: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == u.uid && st.Gid == u.gid {
		return nil
	}
	err = filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(u.uid), int(u.gid))
	})
	if err != nil {
		return fmt.Errorf("localpg: chown data dir to %s: %w", u.name, err)
	}
	return nil
}

// checkSearchable verifies u can traverse dir and all of its ancestors,
// which PostgreSQL needs to reach its data directory.
func (u *osUser) checkSearchable(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("localpg: stat %s: %w", d, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if !u.canSearch(fi.Mode().Perm(), st.Uid, st.Gid) {
			return fmt.Errorf("localpg: directory %s (mode %v) is not searchable by OS user %q, which PostgreSQL runs as because this process is root; "+
				"chmod o+x it or put the data directory somewhere else (e.g. under /tmp)", d, fi.Mode().Perm(), u.name)
		}
		if parent := filepath.Dir(d); parent == d {
			return nil
		}
	}
}

func (u *osUser) canSearch(perm fs.FileMode, uid, gid uint32) bool {
	if uid == u.uid {
		return perm&0o100 != 0
	}
	if gid == u.gid {
		return perm&0o010 != 0
	}
	for _, g := range u.groups {
		if g == gid {
			return perm&0o010 != 0
		}
	}
	return perm&0o001 != 0
}

// processAlive reports whether a process with this pid exists.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
