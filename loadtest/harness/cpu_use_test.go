package harness

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// The name may hold spaces and parentheses: fields count from the
	// last ')'. utime 250 and stime 50 ticks of 1/100 s.
	const rest = " S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1"
	tests := []struct {
		line string
		want time.Duration
		ok   bool
	}{
		{"1234 (fairq)" + rest, 3 * time.Second, true},
		{"1234 (a) b (c d)" + rest, 3 * time.Second, true},
		{"1234 (fairq) S 1 2 3 4 5 6 7 8 9 10 250", 0, false}, // cut short
		{"1234 (fairq) S 1 2 3 4 5 6 7 8 9 10 x 50 0", 0, false},
		{"1234 fairq" + rest, 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseProcStat(tt.line)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseProcStat(%q) = %v, %v; want %v, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}

// TestCPUMeter measures real processes: a busy one counts its CPU time
// over the span, an idle one about none, one started within the span all
// of its own, and one that exits within it up to its end (its resource
// usage). Roles add up.
func TestCPUMeter(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("CPU times come from /proc")
	}
	dir := t.TempDir()
	start := func(name, script string) *process {
		t.Helper()
		p, err := startProcess(name, dir, filepath.Join(dir, name+".log"), nil, false, nil, "sh", "-c", script)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.kill(); <-p.done })
		return p
	}
	busy := start("busy", "while :; do :; done")
	idle := start("idle", "exec sleep 30")
	// Busy for a while before the span: that time is not the span's.
	time.Sleep(300 * time.Millisecond)
	before, _ := busy.cpuTime()
	sources := []cpuSource{{role: "busy", p: busy}, {role: "idle", p: idle}, {role: "self", pid: os.Getpid()}}
	m := beginCPU(sources)
	late := start("late", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done")
	<-late.done
	time.Sleep(200 * time.Millisecond)
	u := m.end(append(sources, cpuSource{role: "busy", p: late}), map[string]time.Duration{"extra": 2 * time.Second})
	if u == nil {
		t.Fatal("no CPU use read")
	}
	lateCPU, ok := late.cpuTime()
	if !ok || lateCPU <= 0 {
		t.Fatalf("exited process: CPU time %v, %v; want some", lateCPU, ok)
	}
	after, _ := busy.cpuTime()
	span := after - before + lateCPU
	if got := time.Duration(u.ByRole["busy"] * float64(time.Second)); got <= lateCPU || got > span+50*time.Millisecond {
		t.Errorf("busy role: %v; want more than the late process's %v and at most the busy one's since the start plus it, %v", got, lateCPU, span)
	}
	if got := u.ByRole["idle"]; got > 0.02 {
		t.Errorf("idle process: %.3f s of CPU, want about none", got)
	}
	if u.ByRole["extra"] != 2 || u.Seconds <= 0 || u.Cores != runtime.NumCPU() || u.Busy <= 0 || u.Busy > 1 {
		t.Errorf("CPU use %+v: want extra 2 s, a span, the machine's cores and a busy share in (0, 1]", u)
	}
}
