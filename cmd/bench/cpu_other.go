//go:build !linux

package main

// cpuSample is empty where /proc/stat is not there to read.
type cpuSample struct{}

func sampleCPU() cpuSample { return cpuSample{} }

// cpuSplit has nothing to say off Linux.
func cpuSplit(cpuSample) string { return "" }
