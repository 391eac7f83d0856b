package localpg

import (
	"bufio"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// choosePort prefers the port a reused cluster was configured with (stable
// URLs across restarts), falling back to a fresh free port.
func (s *Server) choosePort() (int, error) {
	if p := configuredPort(s.dataDir); p > 0 && portFree(p) {
		return p, nil
	}
	return FreePort()
}

// FreePort returns a TCP port on 127.0.0.1 that is unused right now,
// below 32768: the kernel hands out ports from 32768 up to outgoing
// connections, which could take a listener's port between choosing and
// binding it. Another process may still take it first; Start retries for
// that.
func FreePort() (int, error) {
	for range 200 {
		port := 20000 + mathrand.IntN(32768-20000)
		if portFree(port) {
			return port, nil
		}
	}
	return 0, errors.New("localpg: no free port found between 20000 and 32767")
}

// Listen listens on a TCP port of 127.0.0.1 below 32768 (see FreePort),
// for tests and tools that need a listener of their own.
func Listen() (net.Listener, error) {
	var err error
	for range 20 {
		var port int
		if port, err = FreePort(); err != nil {
			return nil, err
		}
		var ln net.Listener
		if ln, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			return ln, nil
		}
	}
	return nil, fmt.Errorf("localpg: listen: %w", err)
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// configuredPort returns the last "port =" setting in postgresql.conf, or 0.
func configuredPort(dataDir string) int {
	f, err := os.Open(filepath.Join(dataDir, "postgresql.conf"))
	if err != nil {
		return 0
	}
	defer f.Close()
	port := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(key) != "port" {
			continue
		}
		val = strings.Trim(strings.TrimSpace(val), "'")
		if p, err := strconv.Atoi(val); err == nil {
			port = p
		}
	}
	return port
}
