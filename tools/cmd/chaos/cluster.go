package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/pgsched/pgsched/internal/localpg"
)

// cluster runs the worker processes. A node keeps its id, HTTP port and log
// file across restarts, so a killed node comes back as itself.
type cluster struct {
	bin    string
	env    []string // shared by every node
	logger *slog.Logger
	nodes  []*node

	// crashFunc records a worker exit nobody asked for.
	crashFunc func(Fault)
	stopped   bool
}

type node struct {
	id       string
	httpAddr string
	logPath  string
	env      []string

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{} // closed when cmd has exited
	expected bool          // the current process is being killed or stopped on purpose
	starts   int
}

// workerConfig is what every node gets from the chaos run.
type workerConfig struct {
	databaseURL, schema, receiverURL string
	leaseTTL, drainTimeout, flexDown time.Duration
}

func newCluster(bin, outDir string, n int, cfg workerConfig, logger *slog.Logger) (*cluster, error) {
	c := &cluster{
		bin: bin,
		env: append(os.Environ(),
			"DATABASE_URL="+cfg.databaseURL,
			"PGSCHED_SCHEMA="+cfg.schema,
			"PGSCHED_MIGRATE=false",
			"PGSCHED_LEASE_TTL="+cfg.leaseTTL.String(),
			"PGSCHED_DRAIN_TIMEOUT="+cfg.drainTimeout.String(),
			"PGSCHED_FLEX_DOWN="+cfg.flexDown.String(),
		),
		logger: logger,
	}
	for i := 1; i <= n; i++ {
		port, err := localpg.FreePort()
		if err != nil {
			return nil, err
		}
		id := "w" + strconv.Itoa(i)
		nd := &node{
			id:       id,
			httpAddr: "127.0.0.1:" + strconv.Itoa(port),
			logPath:  filepath.Join(outDir, id+".log"),
		}
		nd.env = append(append([]string(nil), c.env...),
			"PGSCHED_NODE_ID="+id,
			"PGSCHED_HTTP_ADDR="+nd.httpAddr,
			"PGSCHED_WEBHOOKS=*="+cfg.receiverURL+"/"+id,
		)
		c.nodes = append(c.nodes, nd)
	}
	return c, nil
}

// startAll starts every node and waits until each reports ready (holds a
// live lease).
func (c *cluster) startAll(ctx context.Context, timeout time.Duration) error {
	for _, nd := range c.nodes {
		if err := c.start(nd); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, nd := range c.nodes {
		if err := nd.waitReady(ctx); err != nil {
			return fmt.Errorf("node %s not ready (see %s): %w", nd.id, nd.logPath, err)
		}
	}
	return nil
}

// start runs a new process for nd, its stdout and stderr appended to its
// log file after a line saying which start this is.
func (c *cluster) start(nd *node) error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	f, err := os.OpenFile(nd.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("node %s log: %w", nd.id, err)
	}
	defer f.Close()
	nd.starts++
	fmt.Fprintf(f, "=== chaos: start #%d of %s at %s\n", nd.starts, nd.id, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(c.bin)
	cmd.Env = nd.env
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group: a Ctrl-C meant for the chaos run reaches the
	// workers through shutdown, in order, not all at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting node %s: %w", nd.id, err)
	}
	done := make(chan struct{})
	nd.cmd, nd.done, nd.expected = cmd, done, false
	go func() {
		err := cmd.Wait()
		close(done)
		nd.mu.Lock()
		expected := nd.expected || nd.cmd != cmd
		nd.mu.Unlock()
		if !expected {
			now := time.Now()
			c.logger.Error("worker exited on its own", "node", nd.id, "pid", cmd.Process.Pid, "error", err, "log", nd.logPath)
			if c.crashFunc != nil {
				c.crashFunc(Fault{Kind: FaultCrash, Node: nd.id, Start: now, End: now})
			}
		}
	}()
	c.logger.Info("worker started", "node", nd.id, "pid", cmd.Process.Pid, "start", nd.starts)
	return nil
}

// kill SIGKILLs nd's process and waits for it to be gone.
func (c *cluster) kill(nd *node) error {
	nd.mu.Lock()
	cmd, done := nd.cmd, nd.done
	nd.expected = true
	nd.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s: %w", nd.id, err)
	}
	<-done
	return nil
}

// freeze SIGSTOPs nd's process; thaw SIGCONTs it.
func (c *cluster) freeze(nd *node) error { return nd.signal(syscall.SIGSTOP) }
func (c *cluster) thaw(nd *node) error   { return nd.signal(syscall.SIGCONT) }

func (nd *node) signal(sig syscall.Signal) error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if err := nd.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%s %s: %w", sig, nd.id, err)
	}
	return nil
}

// ready reports whether the node answers /readyz with 200 now.
func (nd *node) ready(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+nd.httpAddr+"/readyz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// waitReady polls the node's /readyz.
func (nd *node) waitReady(ctx context.Context) error {
	client := &http.Client{Timeout: time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+nd.httpAddr+"/readyz", nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		nd.mu.Lock()
		done := nd.done
		nd.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			return errors.New("the worker exited")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stopAll thaws every node and sends SIGTERM, then SIGKILLs what has not
// exited by the deadline. Only the first call does anything.
func (c *cluster) stopAll(timeout time.Duration) {
	if c.stopped {
		return
	}
	c.stopped = true
	var wg sync.WaitGroup
	for _, nd := range c.nodes {
		nd.mu.Lock()
		cmd, done := nd.cmd, nd.done
		nd.expected = true
		nd.mu.Unlock()
		if cmd == nil {
			continue
		}
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		wg.Go(func() {
			select {
			case <-done:
				c.logger.Info("worker stopped", "node", nd.id, "exit", cmd.ProcessState.String())
			case <-time.After(timeout):
				c.logger.Warn("worker did not stop in time; killing it", "node", nd.id, "timeout", timeout)
				_ = cmd.Process.Signal(syscall.SIGKILL)
				<-done
			}
		})
	}
	wg.Wait()
}
