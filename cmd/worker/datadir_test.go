package main

import (
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFirstRunAsRoot: the README's first command, ./scripts/run-worker.sh,
// on a fresh Debian machine as root, whose home is mode 0700: the worker,
// run without DATABASE_URL or PGSCHED_DATA_DIR, keeps the local
// PostgreSQL's data where the server's user, postgres, can reach it, says
// where, becomes ready, and exits 0 on Ctrl-C, having stopped the server
// it started and written nothing into the home.
func TestFirstRunAsRoot(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("runs only as root (CI does): it is about root's 0700 home and writes to " + rootDataDir)
	}
	pgUser, err := user.Lookup("postgres")
	require.NoError(t, err, "the local PostgreSQL runs as the user postgres")
	// An existing installation is used, as the worker would, but kept.
	base := filepath.Dir(rootDataDir)
	_, statErr := os.Stat(base)
	ours := os.IsNotExist(statErr)

	home := t.TempDir()
	require.NoError(t, os.Chmod(home, 0o700))
	addr := freeAddr(t)
	// XDG_CONFIG_HOME: the go command keeps its telemetry there, not in
	// the home that must stay empty.
	env := []string{"HOME=" + home, "PGSCHED_HTTP_ADDR=" + addr, "PGSCHED_DRAIN_TIMEOUT=1s", "XDG_CONFIG_HOME=" + t.TempDir()}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != "HOME" && k != "DATABASE_URL" && !strings.HasPrefix(k, "PGSCHED_") && !strings.HasPrefix(k, "XDG_") {
			env = append(env, kv)
		}
	}
	// Go's caches stay where they are: the script builds the worker, and
	// a newcomer's would be under the home, which must stay empty here.
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		out, err := exec.Command("go", "env", k).Output()
		require.NoError(t, err)
		env = append(env, k+"="+strings.TrimSpace(string(out)))
	}
	// README's first command, exactly as a newcomer runs it.
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "run-worker.sh"))
	require.NoError(t, err)
	worker := func(args ...string) *exec.Cmd {
		cmd := exec.Command(script, args...)
		cmd.Env = env
		return cmd
	}
	t.Cleanup(func() {
		out, err := worker("-stop-local").CombinedOutput()
		require.NoError(t, err, "worker -stop-local: %s", out)
		if ours {
			require.NoError(t, os.RemoveAll(base))
		}
	})

	cmd := worker()
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(2 * time.Minute) // initdb, then migrations
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("the worker exited (%v) before it was ready\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
		default:
		}
		require.True(t, time.Now().Before(deadline), "the worker became ready\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		time.Sleep(50 * time.Millisecond)
	}
	require.Contains(t, stdout.String(), "using the local PostgreSQL in "+rootDataDir, "it says where the data lives")

	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case err := <-exited:
		require.NoError(t, err, "exit status after SIGINT\nstderr:\n%s", stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("the worker did not exit after SIGINT\nstderr:\n%s", stderr.String())
	}

	fi, err := os.Stat(filepath.Join(rootDataDir, "PG_VERSION"))
	require.NoError(t, err, "the cluster is in %s", rootDataDir)
	require.Equal(t, pgUser.Uid, strconv.Itoa(int(fi.Sys().(*syscall.Stat_t).Uid)), "owned by postgres")
	entries, err := os.ReadDir(home)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing written into root's home")
	out, err := worker("-stop-local").CombinedOutput()
	require.NoError(t, err)
	require.Contains(t, string(out), "no local PostgreSQL runs in "+rootDataDir, "the worker stopped the server it started")
}

// TestDefaultDataDir: the home directory's place, but as root a fixed one
// the server's user can reach, unless root already keeps a cluster in its
// home.
func TestDefaultDataDir(t *testing.T) {
	t.Parallel()
	inHome := filepath.Join(t.TempDir(), ".local", "share", "pgsched", "postgres")
	if os.Geteuid() != 0 {
		require.Equal(t, inHome, defaultDataDir(inHome))
		return
	}
	require.Equal(t, rootDataDir, defaultDataDir(inHome))
	require.NoError(t, os.MkdirAll(inHome, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(inHome, "PG_VERSION"), []byte("15\n"), 0o600))
	require.Equal(t, inHome, defaultDataDir(inHome), "an existing cluster stays where it is")
}
