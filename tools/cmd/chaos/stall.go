package main

import (
	"context"
	"log/slog"
	"time"
)

// minStall is the shortest gap in this process's ticking that counts as a
// stall. On a machine short of CPU every process stalls together; a stall
// near the lease TTL freezes every node past its lease as surely as a
// SIGSTOP would, and the checker must know of it to tell the duplicates it
// causes from a bug.
const minStall = time.Second

// watchStalls ticks until ctx ends and records each gap of at least
// minStall between ticks as a FaultStall.
func watchStalls(ctx context.Context, record func(Fault), logger *slog.Logger) {
	const tick = 50 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		if gap := now.Sub(last); gap >= minStall {
			logger.Warn("stall: this process got no CPU; the workers and PostgreSQL likely neither", "for", gap.Round(time.Millisecond))
			record(Fault{Kind: FaultStall, Start: last, End: now})
		}
		last = now
	}
}
