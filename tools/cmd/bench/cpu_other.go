//go:build !linux

package main

import "time"

// cpuSample is empty where /proc/stat is not there to read.
type cpuSample struct{}

func sampleCPU() cpuSample { return cpuSample{} }

// cpuSplit has nothing to say off Linux.
func cpuSplit(cpuSample) string { return "" }

// cpuCores has nothing to say off Linux.
func cpuCores(cpuSample) (self, rest float64, ok bool) { return 0, 0, false }

// serverCPU has nothing to say off Linux.
func serverCPU() map[string]time.Duration { return nil }

// selfCPU has nothing to say off Linux.
func selfCPU(cpuSample) (time.Duration, bool) { return 0, false }

// pidCPU has nothing to say off Linux.
func pidCPU(int) time.Duration { return 0 }
