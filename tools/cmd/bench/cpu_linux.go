//go:build linux

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuSample is a point in time for cpuSplit: this process's CPU time and
// the machine's busy and idle time from /proc/stat.
type cpuSample struct {
	at         time.Time
	self       time.Duration
	busy, idle time.Duration
}

func sampleCPU() cpuSample {
	s := cpuSample{at: time.Now()}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return s
	}
	// USER_HZ is 100 on every Linux this runs on.
	tick := func(i int) time.Duration {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		return time.Duration(v) * 10 * time.Millisecond
	}
	s.busy = tick(1) + tick(2) + tick(3) + tick(6) + tick(7)
	s.idle = tick(4) + tick(5)
	return s
}

// cpuSplit says how the machine's CPU was spent since start: this process
// (client, worker and handlers), everything else (PostgreSQL, mostly) and
// idle, in cores.
func cpuSplit(start cpuSample) string {
	end := sampleCPU()
	wall := end.at.Sub(start.at).Seconds()
	if wall <= 0 || end.busy == 0 {
		return ""
	}
	self := (end.self - start.self).Seconds() / wall
	busy := (end.busy - start.busy).Seconds() / wall
	idle := (end.idle - start.idle).Seconds() / wall
	return fmt.Sprintf("cpu: bench process %.2f cores, rest %.2f, idle %.2f", self, max(busy-self, 0), idle)
}

// selfCPU returns the CPU time this process used since start.
func selfCPU(start cpuSample) (time.Duration, bool) {
	end := sampleCPU()
	return end.self - start.self, end.self > 0
}

// cpuCores returns the cores this process and everything else used since
// start; ok is false where they cannot be read.
func cpuCores(start cpuSample) (self, rest float64, ok bool) {
	end := sampleCPU()
	wall := end.at.Sub(start.at).Seconds()
	if wall <= 0 || end.busy == 0 {
		return 0, 0, false
	}
	self = (end.self - start.self).Seconds() / wall
	busy := (end.busy - start.busy).Seconds() / wall
	return self, max(busy-self, 0), true
}

// pidCPU is the CPU time process pid has used (0 if it cannot be read).
func pidCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	st := string(b)
	closing := strings.LastIndexByte(st, ')')
	if closing < 0 {
		return 0
	}
	f := strings.Fields(st[closing+1:])
	if len(f) < 13 {
		return 0
	}
	// Fields after the name: state is 0, utime 11, stime 12.
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// serverCPU is the CPU time PostgreSQL processes on this machine have
// used, by data directory (a server's processes run in it), for
// processes alive at the time of the sample: a pool's backends live
// through a run, so the difference of two samples is the servers' work in
// between, as on Citus, where it tells the coordinator's share from the
// workers'.
func serverCPU() map[string]time.Duration {
	out := map[string]time.Duration{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid := e.Name()
		if pid[0] < '0' || pid[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			continue
		}
		st := string(b)
		open, closing := strings.IndexByte(st, '('), strings.LastIndexByte(st, ')')
		if open < 0 || closing < open || st[open+1:closing] != "postgres" {
			continue
		}
		dir, err := os.Readlink("/proc/" + pid + "/cwd")
		if err != nil {
			continue
		}
		f := strings.Fields(st[closing+1:])
		if len(f) < 13 {
			continue
		}
		// Fields after the name: state is 0, utime 11, stime 12.
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		out[dir] += time.Duration(u+s) * 10 * time.Millisecond
	}
	return out
}
