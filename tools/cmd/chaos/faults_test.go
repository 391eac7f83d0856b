package main

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestPlan(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		preset options
		mode   string
		want   map[string]int // at least this many of each kind
	}{
		{"short", shortPreset, "faults", map[string]int{FaultKill: 2, FaultFreeze: 2, FaultPGRestart: 1, FaultReceiver500: 1}},
		{"long", longPreset, "faults", map[string]int{FaultKill: 15, FaultFreeze: 3, FaultPGRestart: 1, FaultReceiver500: 1}},
		{"outage", longPreset, "outage", map[string]int{FaultKill: 15, FaultFreeze: 3, FaultPGOutage: 1, FaultReceiver500: 1}},
		{"failover short", shortPreset, "failover", map[string]int{FaultKill: 2, FaultFreeze: 2, FaultPGFailover: 1, FaultReceiver500: 1}},
		{"failover long", longPreset, "failover", map[string]int{FaultKill: 15, FaultFreeze: 3, FaultPGFailover: 1, FaultReceiver500: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for seed := range uint64(200) {
				window := tt.preset.duration
				if tt.mode == "failover" {
					window += failoverGap(tt.preset.ttl)
				}
				pc := planConfig{
					window: window, mode: tt.mode, ttl: tt.preset.ttl, killEvery: tt.preset.killEvery,
					freezes: tt.preset.freezes, outage: tt.preset.outage, fail500: tt.preset.fail500,
				}
				steps := plan(rand.New(rand.NewPCG(seed, 1)), pc)
				got := map[string]int{}
				for i, s := range steps {
					got[s.kind]++
					if i > 0 && s.at < steps[i-1].at {
						t.Fatalf("seed %d: steps out of order: %v", seed, steps)
					}
					if end := s.at + s.dur; s.at < 0 || end > pc.window {
						t.Errorf("seed %d: %s at %s for %s leaves the %s window", seed, s.kind, s.at, s.dur, pc.window)
					}
					if s.kind == FaultFreeze && (s.at+freezeLead)%dueGrid != 0 {
						t.Errorf("seed %d: freeze at %s is not %s before a tick of %s", seed, s.at, freezeLead, dueGrid)
					}
				}
				for _, f := range steps {
					if f.kind != FaultPGFailover {
						continue
					}
					// No node is killed or frozen, nor suffers from it, from
					// the failover's lead until its workers are judged back.
					from, to := f.at-failoverLead, f.at+pc.ttl+failoverReadyWithin
					for _, s := range steps {
						if (s.kind == FaultKill || s.kind == FaultFreeze) && s.at < to && s.at+s.dur+2*pc.ttl > from {
							t.Errorf("seed %d: %s at %s (for %s) reaches into the failover's quiet span %s..%s", seed, s.kind, s.at, s.dur, from, to)
						}
					}
				}
				for kind, n := range tt.want {
					if got[kind] < n {
						t.Fatalf("seed %d: %d %s faults, want at least %d: %v", seed, got[kind], kind, n, steps)
					}
				}
			}
		})
	}
}

func TestSpreadTasks(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	all := spreadTasks(rand.New(rand.NewPCG(1, 2)), 1000, 7, t0, time.Minute)
	if len(all) != 1000 {
		t.Fatalf("%d tasks, want 1000", len(all))
	}
	seen := map[string]bool{}
	for i, task := range all {
		if seen[task.UniquenessKey] {
			t.Fatalf("uniqueness_key %s twice", task.UniquenessKey)
		}
		seen[task.UniquenessKey] = true
		if task.ScheduledAt.Before(t0) || !task.ScheduledAt.Before(t0.Add(time.Minute)) || task.ScheduledAt.Sub(t0)%dueGrid != 0 {
			t.Errorf("task %d due at %s: outside the window or off the grid", i, task.ScheduledAt)
		}
		if i > 0 && all[i-1].OrderingID == task.OrderingID {
			prev := keyOf(all[i-1].OrderingID, all[i-1].ScheduledAt, all[i-1].UniquenessKey)
			if !prev.before(keyOf(task.OrderingID, task.ScheduledAt, task.UniquenessKey)) {
				t.Errorf("task %d does not come after task %d of its ordering_id", i, i-1)
			}
		}
	}
}
