package localpg

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ShutdownMode is pg_ctl's -m: how a stop treats the sessions still
// connected.
type ShutdownMode string

// The shutdown modes of pg_ctl stop.
const (
	// Smart waits for every client to disconnect.
	Smart ShutdownMode = "smart"
	// Fast disconnects clients, rolls back their transactions and writes a
	// checkpoint.
	Fast ShutdownMode = "fast"
	// Immediate kills every server process at once, without a checkpoint:
	// the next start runs crash recovery, as after a power cut (minus the
	// loss of unflushed data, which the OS still holds).
	Immediate ShutdownMode = "immediate"
)

// Restart stops the server in mode and starts it again on the same port and
// settings, so connection strings stay valid. Restart(ctx, Immediate) is
// `pg_ctl restart -m immediate` without pg_ctl restart's habit of keeping
// its output pipe open for the server's lifetime.
func (s *Server) Restart(ctx context.Context, mode ShutdownMode) error {
	if err := s.Halt(ctx, mode); err != nil {
		return err
	}
	return s.Resume(ctx)
}

// Halt stops the server in mode and leaves it stopped until Resume. Only a
// server Start started can be halted; Stop after Halt is a no-op that
// succeeds.
func (s *Server) Halt(ctx context.Context, mode ShutdownMode) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.controllable(mode); err != nil {
		return err
	}
	out, err := s.run(ctx, s.bin("pg_ctl"), "stop", "-D", s.dataDir, "-m", string(mode), "-w",
		"-t", strconv.Itoa(int(pgCtlTimeout/time.Second)))
	if err != nil {
		return fmt.Errorf("localpg: pg_ctl stop -m %s: %w%s", mode, err, formatOutput(out))
	}
	s.logger.Info("localpg: server halted", "data_dir", s.dataDir, "port", s.port, "mode", string(mode))
	return nil
}

// Resume starts a server stopped by Halt (or killed) again on its port.
func (s *Server) Resume(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.controllable(Fast); err != nil {
		return err
	}
	if err := s.pgCtlStart(ctx); err != nil {
		return err
	}
	s.logger.Info("localpg: server resumed", "data_dir", s.dataDir, "port", s.port)
	return nil
}

// controllable reports why Halt or Resume may not touch the server.
func (s *Server) controllable(mode ShutdownMode) error {
	switch {
	case !s.owned:
		return errors.New("localpg: the server was already running when Start was called; only a server Start started can be halted or resumed")
	case s.stopped:
		return errors.New("localpg: the server was stopped with Stop")
	}
	switch mode {
	case Smart, Fast, Immediate:
		return nil
	}
	return fmt.Errorf("localpg: unknown shutdown mode %q (want smart, fast or immediate)", mode)
}
