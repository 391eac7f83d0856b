//go:build !unix

package localpg

import (
	"errors"
	"io/fs"
	"os/exec"
)

type osUser struct{}

func serverUser() (*osUser, error) {
	return nil, errors.New("localpg: only supported on Unix-like systems")
}

func (u *osUser) apply(*exec.Cmd)                            {}
func (u *osUser) own(string) error                           { return nil }
func (u *osUser) checkSearchable(string) error               { return nil }
func (u *osUser) canSearch(fs.FileMode, uint32, uint32) bool { return true }
func processAlive(int) bool                                  { return false }
