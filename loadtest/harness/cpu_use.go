package harness

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Roles of the processes whose CPU time a run accounts (CPUUse.ByRole):
// the system under test, the services it runs on, and the harness's own
// parts.
const (
	roleGateways = "gateways"
	roleWorkers  = "workers"
	roleDev      = "fairq dev"
	roleSQS      = "sqs"
	roleRedis    = "redis"
	roleClients  = "clients"
	roleApp      = "application"
	roleHarness  = "harness"
	roleBurner   = "burner"
)

// cpuRoles are the roles in the order reports show them, with the words
// they use.
var cpuRoles = []struct{ role, text string }{
	{roleGateways, "gateways"},
	{roleWorkers, "workers"},
	{roleDev, "fairq dev"},
	{roleSQS, "SQS emulator"},
	{roleRedis, "Redis"},
	{roleClients, "clients"},
	{roleApp, "application"},
	{roleHarness, "harness"},
	{roleBurner, "burn process (the control's)"},
}

// CPUUse is the CPU time a run's processes used while its load was
// offered, by role, and the machine's busy share over the same span: who
// used the cores that the latencies were measured on. Gateways and
// workers include those stopped or started during the load (an outage);
// the clients are counted over their process's whole life, which is the
// load and a second before it; the harness counts the sink when the
// application runs in its process.
type CPUUse struct {
	// Seconds is the span measured: from just before the clients start
	// to the answer of their last request.
	Seconds float64 `json:"seconds"`
	// ByRole is the CPU seconds (user and system) used by each role's
	// processes over the load.
	ByRole map[string]float64 `json:"by_role"`
	// Busy is the share of the machine's CPU time, every core, that was
	// not idle over the load (stolen time counts as busy), 0-1; Cores is
	// how many it has.
	Busy  float64 `json:"busy"`
	Cores int     `json:"cores"`
}

// text tells the CPU use in a sentence: "CPU over the load, in cores:
// gateways 0.26, workers 0.28, …; the machine 61% busy of its 2 cores".
func (u *CPUUse) text() string {
	if u == nil || u.Seconds <= 0 {
		return ""
	}
	var parts []string
	for _, r := range cpuRoles {
		if s, ok := u.ByRole[r.role]; ok {
			parts = append(parts, fmt.Sprintf("%s %.2f", r.text, s/u.Seconds))
		}
	}
	return fmt.Sprintf("CPU over the load, in cores: %s; the machine %.0f%% busy of its %d cores",
		strings.Join(parts, ", "), 100*u.Busy, u.Cores)
}

// cpuSource is a process whose CPU time a run accounts: a child of the
// harness (p), or a process it knows by its pid alone (a service).
type cpuSource struct {
	role string
	p    *process
	pid  int
}

// used returns the CPU time the source's process has used so far.
func (c cpuSource) used() (time.Duration, bool) {
	if c.p != nil {
		return c.p.cpuTime()
	}
	return pidCPU(c.pid)
}

// key identifies the source's process while it lives.
func (c cpuSource) key() int {
	if c.p != nil {
		return c.p.cmd.Process.Pid
	}
	return c.pid
}

// cpuMeter measures CPUUse: begun when the load starts, ended when it
// ends, with the sources alive at each moment.
type cpuMeter struct {
	at      time.Time
	machine machineTimes
	ok      bool
	start   map[int]time.Duration // by cpuSource.key
}

// beginCPU reads the sources' CPU time and the machine's now.
func beginCPU(sources []cpuSource) *cpuMeter {
	m := &cpuMeter{at: time.Now(), start: make(map[int]time.Duration, len(sources))}
	m.machine, m.ok = cpuTimes()
	for _, s := range sources {
		if d, ok := s.used(); ok {
			m.start[s.key()] = d
		}
	}
	return m
}

// end returns the CPU use since beginCPU: each source's time now less its
// time then (all of it for one started since), and extra CPU seconds by
// role (a process counted over its whole life). Nil where the machine's
// CPU time cannot be read.
func (m *cpuMeter) end(sources []cpuSource, extra map[string]time.Duration) *CPUUse {
	now, ok := cpuTimes()
	if !ok || !m.ok {
		return nil
	}
	u := &CPUUse{Seconds: time.Since(m.at).Seconds(), ByRole: make(map[string]float64), Cores: runtime.NumCPU()}
	if total := now.Total - m.machine.Total; total > 0 {
		u.Busy = 1 - float64(now.Idle-m.machine.Idle)/float64(total)
	}
	for _, s := range sources {
		if d, ok := s.used(); ok {
			u.ByRole[s.role] += (d - m.start[s.key()]).Seconds()
		}
	}
	for role, d := range extra {
		u.ByRole[role] += d.Seconds()
	}
	return u
}

// userHZ is the unit of the CPU times in /proc/PID/stat: clock ticks of
// 1/100 s (USER_HZ, 100 on every Linux architecture).
const userHZ = 100

// pidCPU returns the CPU time, user and system, that process pid has used,
// from /proc; false where it cannot be read (no such process, no /proc).
func pidCPU(pid int) (time.Duration, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseProcStat(string(data))
}

// parseProcStat parses a /proc/PID/stat line for the process's utime and
// stime, its 14th and 15th fields. The second, the command's name in
// parentheses, may hold spaces and parentheses itself: the fields are
// counted from after its last ')'.
func parseProcStat(line string) (time.Duration, bool) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(line[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	var ticks uint64
	for _, s := range f[11:13] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, false
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / userHZ, true
}

// serviceSources are the services' processes known by pid.
func serviceSources(s Services) []cpuSource {
	var out []cpuSource
	for role, pids := range s.PIDs {
		for _, pid := range pids {
			out = append(out, cpuSource{role: role, pid: pid})
		}
	}
	return out
}
