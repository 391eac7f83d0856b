package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/internal/pgtest"
)

// TestCLIExits: -h prints the flags to stdout and ends cleanly (main exits
// 0 on errDone), -version prints the version, and an unknown flag is one
// line that says where the flags are listed.
func TestCLIExits(t *testing.T) {
	t.Parallel()
	getenv := func(string) string { return "" }

	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"-h"}, getenv, &out, &errOut)
	require.ErrorIs(t, err, errDone)
	require.Contains(t, out.String(), "-lease-ttl")
	require.Contains(t, out.String(), "PGSCHED_LEASE_TTL")
	require.Empty(t, errOut.String())

	out.Reset()
	err = run(context.Background(), []string{"-version"}, getenv, &out, &errOut)
	require.ErrorIs(t, err, errDone)
	require.Regexp(t, `^pgsched worker \S+`, out.String())

	out.Reset()
	err = run(context.Background(), []string{"-bogus"}, getenv, &out, &errOut)
	require.Error(t, err)
	require.False(t, errors.Is(err, errDone))
	require.Equal(t, "flag provided but not defined: -bogus (worker -h lists the flags)", err.Error())
	require.Empty(t, out.String()+errOut.String(), "the error is printed once, by main")
}

// The test binary doubles as the worker binary: with PGSCHED_TEST_MAIN set
// it runs main, so a test can signal a real process and read its exit code.
func init() {
	if os.Getenv("PGSCHED_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
}

// TestSigintExitsZero: a worker process interrupted (Ctrl-C) drains, stops
// and exits 0; a second run's SIGTERM likewise.
func TestSigintExitsZero(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSchema(t, pgtest.SchemaOptions{})
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		addr := freeAddr(t)
		cmd := exec.Command(os.Args[0]) // init runs main before any test flag is read
		cmd.Env = append(os.Environ(), "PGSCHED_TEST_MAIN=1", "DATABASE_URL="+db.URL, "PGSCHED_SCHEMA="+db.Schema,
			"PGSCHED_HTTP_ADDR="+addr, "PGSCHED_LEASE_TTL=2s", "PGSCHED_DRAIN_TIMEOUT=1s")
		var stderr syncBuffer // written by os/exec's copying goroutine
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, err := http.Get("http://" + addr + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			require.True(t, time.Now().Before(deadline), "the worker became ready: %s", stderr.String())
			time.Sleep(20 * time.Millisecond)
		}
		require.NoError(t, cmd.Process.Signal(sig))
		err := cmd.Wait()
		require.NoError(t, err, "exit status after %v; stderr:\n%s", sig, stderr.String())
		require.Contains(t, stderr.String(), "worker stopped")
		require.False(t, strings.Contains(stderr.String(), "level=ERROR"), "no error logged on a clean stop:\n%s", stderr.String())
	}
}
