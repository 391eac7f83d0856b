//go:build !unix

package main

import (
	"context"
	"os/exec"
	"time"
)

// runGroup runs cmd and waits for it, killing it when ctx ends or limit
// passes (without process groups, the test binary may outlive it).
func runGroup(ctx context.Context, cmd *exec.Cmd, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		return <-done
	}
}
