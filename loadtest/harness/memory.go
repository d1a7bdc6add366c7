package harness

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"
)

// MemSample is one reading of a process's memory from /proc/<pid>/status.
type MemSample struct {
	// At is since the start of the load.
	At time.Duration `json:"at"`
	// Role is "gateway", "worker-1", …: the part the process plays, which
	// a restarted process keeps.
	Role string `json:"role"`
	// RSS is VmRSS, the resident set now; HWM is VmHWM, its peak over the
	// process's life; both in bytes.
	RSS int64 `json:"rss"`
	HWM int64 `json:"hwm"`
}

// memorySampler reads the resident memory of the processes it tracks
// every interval, by role, so that a restarted process is followed under
// the same role.
type memorySampler struct {
	every time.Duration
	start time.Time

	mu      sync.Mutex
	procs   map[string]*process
	samples []MemSample
}

func newMemorySampler(every time.Duration, start time.Time) *memorySampler {
	return &memorySampler{every: every, start: start, procs: make(map[string]*process)}
}

// track follows p under role from now on, in place of the role's earlier
// process.
func (m *memorySampler) track(role string, p *process) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.procs[role] = p
}

// run samples until ctx ends.
func (m *memorySampler) run(ctx context.Context) {
	tick := time.NewTicker(m.every)
	defer tick.Stop()
	for {
		m.sample()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sample reads every tracked process once; a process that has exited is
// skipped.
func (m *memorySampler) sample() {
	m.mu.Lock()
	defer m.mu.Unlock()
	at := time.Since(m.start)
	for role, p := range m.procs {
		if !p.running() {
			continue
		}
		rss, hwm, err := readProcMemory(p.pid())
		if err != nil {
			continue
		}
		m.samples = append(m.samples, MemSample{At: at, Role: role, RSS: rss, HWM: hwm})
	}
}

// now reads role's process once, outside the sampling.
func (m *memorySampler) now(role string) (MemSample, bool) {
	m.mu.Lock()
	p := m.procs[role]
	m.mu.Unlock()
	if p == nil || !p.running() {
		return MemSample{}, false
	}
	rss, hwm, err := readProcMemory(p.pid())
	if err != nil {
		return MemSample{}, false
	}
	return MemSample{At: time.Since(m.start), Role: role, RSS: rss, HWM: hwm}, true
}

// all returns the samples so far, in time order.
func (m *memorySampler) all() []MemSample {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(m.samples)
	slices.SortStableFunc(out, func(a, b MemSample) int { return int(a.At - b.At) })
	return out
}

// readProcMemory returns VmRSS and VmHWM of pid in bytes (Linux).
func readProcMemory(pid int) (rss, hwm int64, err error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	return parseProcStatus(data)
}

// parseProcStatus reads VmRSS and VmHWM from the text of a
// /proc/<pid>/status file.
func parseProcStatus(data []byte) (rss, hwm int64, err error) {
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, val, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok {
			continue
		}
		var dst *int64
		switch string(key) {
		case "VmRSS":
			dst = &rss
		case "VmHWM":
			dst = &hwm
		default:
			continue
		}
		f := bytes.Fields(val)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, 0, fmt.Errorf("/proc status: %s: %q: want a number of kB", key, bytes.TrimSpace(val))
		}
		n, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc status: %s: %w", key, err)
		}
		*dst = n << 10
		found++
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("/proc status: VmRSS or VmHWM missing")
	}
	return rss, hwm, nil
}

// MemPeak is the largest VmRSS and VmHWM of a process role, in bytes.
type MemPeak struct {
	RSS int64 `json:"rss"`
	HWM int64 `json:"hwm"`
}

// peaks returns the peak VmRSS and VmHWM of each role among samples whose
// At is in [from, to); to ≤ 0 means no end.
func peaks(samples []MemSample, from, to time.Duration) map[string]MemPeak {
	out := make(map[string]MemPeak)
	for _, s := range samples {
		if s.At < from || to > 0 && s.At >= to {
			continue
		}
		p := out[s.Role]
		p.RSS, p.HWM = max(p.RSS, s.RSS), max(p.HWM, s.HWM)
		out[s.Role] = p
	}
	return out
}
