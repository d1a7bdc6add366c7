package harness

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"
)

// CPUModel returns the model name of the machine's first CPU, from
// /proc/cpuinfo; "" where there is none.
func CPUModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(data)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// MemTotal returns the machine's memory in bytes, from /proc/meminfo; 0
// where there is none.
func MemTotal() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(data) {
		rest, ok := bytes.CutPrefix(line, []byte("MemTotal:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}

// CPUSample is the machine's CPU time at one moment, in clock ticks
// since boot: Steal is what the hypervisor gave to others while this
// machine's CPUs had work to run (another tenant of the host), Total all
// of it.
type CPUSample struct {
	At           time.Duration // since Result.Start
	Steal, Total uint64
}

// cpuTimes reads the machine's CPU time from /proc/stat; ok is false
// where there is none.
func cpuTimes() (steal, total uint64, ok bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(data), "\n")
	return parseCPUTimes(line)
}

// parseCPUTimes parses the "cpu" line of /proc/stat: user, nice, system,
// idle, iowait, irq, softirq, steal, then guest and guest_nice, which
// user and nice already count.
func parseCPUTimes(line string) (steal, total uint64, ok bool) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, false
	}
	for i, s := range f[1:9] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		total += v
		if i == 7 {
			steal = v
		}
	}
	return steal, total, true
}

// stealShare returns the share of the CPU time that the hypervisor took
// from the machine between the first sample at or after from and the
// last at or before to, -1 without two such samples: a run whose share
// is well above its others' had its timings disturbed from outside.
func stealShare(samples []CPUSample, from, to time.Duration) float64 {
	first, last := -1, -1
	for i, s := range samples {
		if s.At >= from && first < 0 {
			first = i
		}
		if s.At <= to {
			last = i
		}
	}
	if first < 0 || last <= first || samples[last].Total <= samples[first].Total {
		return -1
	}
	a, b := samples[first], samples[last]
	return float64(b.Steal-a.Steal) / float64(b.Total-a.Total)
}
