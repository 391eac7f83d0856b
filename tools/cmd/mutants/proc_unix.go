//go:build unix

package main

import (
	"context"
	"os/exec"
	"syscall"
	"time"
)

// runGroup runs cmd in a process group of its own and waits for it. When
// ctx ends or limit passes, the whole group gets SIGINT, then SIGKILL ten
// seconds later: go test's test binary, and the worker processes tests
// start, are not go's to stop when go itself is killed.
func runGroup(ctx context.Context, cmd *exec.Cmd, limit time.Duration) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	case <-timer.C:
	}
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGINT)
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return <-done
}
