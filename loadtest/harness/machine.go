package harness

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"slices"
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
func cpuTimes() (t machineTimes, ok bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineTimes{}, false
	}
	line, _, _ := strings.Cut(string(data), "\n")
	return parseCPUTimes(line)
}

// machineTimes are the machine's CPU times since boot, in clock ticks:
// what the hypervisor stole, what was idle (iowait included), and all of
// it.
type machineTimes struct {
	Steal, Idle, Total uint64
}

// parseCPUTimes parses the "cpu" line of /proc/stat: user, nice, system,
// idle, iowait, irq, softirq, steal, then guest and guest_nice, which
// user and nice already count.
func parseCPUTimes(line string) (t machineTimes, ok bool) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return machineTimes{}, false
	}
	for i, s := range f[1:9] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return machineTimes{}, false
		}
		t.Total += v
		switch i {
		case 3, 4:
			t.Idle += v
		case 7:
			t.Steal = v
		}
	}
	return t, true
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
	if first < 0 || last <= first {
		return -1
	}
	if x, ok := share(samples[first], samples[last]); ok {
		return x
	}
	return -1
}

// share returns the share of the CPU time between samples a and b that
// the hypervisor took; ok is false when no time passed between them.
func share(a, b CPUSample) (float64, bool) {
	if b.Total <= a.Total {
		return 0, false
	}
	return float64(b.Steal-a.Steal) / float64(b.Total-a.Total), true
}

// StealLeaveOut is the hypervisor's share of the CPU over a second of a
// run from which the messages sent in that second are left out of the
// latency criteria: on the 2-core machines of BENCHMARKS.md, the seconds
// with at least this much steal had a median p95 of 9.5 ms, the others
// 4.2 ms. A criterion that compares p95s of a few milliseconds with a
// tolerance of 20% then measures the host, not fairq.
const StealLeaveOut = 0.05

// LeftOutMost is the share of a window's messages that may be left out
// (StealLeaveOut) for its p95 to be judged: beyond it the criterion is
// not judged, and the run is to be made again.
const LeftOutMost = 0.25

// stolen returns whether a time of the run fell between two samples
// with at least StealLeaveOut of the CPU stolen; without samples,
// never.
func stolen(samples []CPUSample) func(at time.Duration) bool {
	return func(at time.Duration) bool {
		i, _ := slices.BinarySearchFunc(samples, at, func(s CPUSample, at time.Duration) int { return cmp.Compare(s.At, at) })
		// samples[i-1].At < at <= samples[i].At: the interval ending at i
		// (or at at == samples[i].At, the one after it).
		if i < len(samples) && samples[i].At == at {
			i++
		}
		if i == 0 || i >= len(samples) {
			return false
		}
		x, ok := share(samples[i-1], samples[i])
		return ok && x >= StealLeaveOut
	}
}

// Judged is the p95 a latency criterion judges a window by: of its
// messages less those sent in a second of steal (StealLeaveOut), and of
// all of them.
type Judged struct {
	// P95 is of the messages kept; All of every message of the window.
	P95 time.Duration `json:"p95"`
	All time.Duration `json:"all_p95"`
	// Kept and LeftOut count the window's messages.
	Kept    int `json:"kept"`
	LeftOut int `json:"left_out"`
}

// judge returns the Judged of the latencies lat of a window's messages,
// left[i] whether the i-th was sent in a second of steal.
func judge(lat []time.Duration, left []bool) Judged {
	kept := make([]time.Duration, 0, len(lat))
	for i, l := range lat {
		if !left[i] {
			kept = append(kept, l)
		}
	}
	j := Judged{Kept: len(kept), LeftOut: len(lat) - len(kept)}
	j.P95 = quantiles(kept).P95
	j.All = quantiles(slices.Clone(lat)).P95
	return j
}

// Void reports whether too many of the window's messages were left out
// (LeftOutMost), or none was kept, for its p95 to be judged.
func (j Judged) Void() bool {
	return j.Kept == 0 || float64(j.LeftOut) > LeftOutMost*float64(j.Kept+j.LeftOut)
}

// leftOutNote tells what was left out of the windows js, "" for
// nothing: "left out, sent in seconds of ≥5% CPU steal: 80 of 2200
// messages".
func leftOutNote(js ...Judged) string {
	out, all := 0, 0
	for _, j := range js {
		out += j.LeftOut
		all += j.Kept + j.LeftOut
	}
	if out == 0 {
		return ""
	}
	return fmt.Sprintf("left out, sent in seconds of ≥%.0f%% CPU steal: %d of %d messages", 100*StealLeaveOut, out, all)
}
