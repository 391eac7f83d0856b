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
