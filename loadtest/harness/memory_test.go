package harness

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseProcStatus(t *testing.T) {
	tests := []struct {
		name     string
		status   string
		rss, hwm int64
		wantErr  bool
	}{
		{"both", "Name:\tfairq\nVmPeak:\t  900 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\nThreads:\t5\n", 1 << 20, 2 << 20, false},
		{"no HWM", "VmRSS:\t1024 kB\n", 0, 0, true},
		{"no RSS", "VmHWM:\t1024 kB\n", 0, 0, true},
		{"not kB", "VmRSS:\t1024 MB\nVmHWM:\t1024 kB\n", 0, 0, true},
		{"not a number", "VmRSS:\tlots kB\nVmHWM:\t1024 kB\n", 0, 0, true},
		{"empty", "", 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rss, hwm, err := parseProcStatus([]byte(tt.status))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %t", err, tt.wantErr)
			}
			if rss != tt.rss || hwm != tt.hwm {
				t.Errorf("rss, hwm = %d, %d; want %d, %d", rss, hwm, tt.rss, tt.hwm)
			}
		})
	}
}

func TestReadProcMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/<pid>/status is Linux's")
	}
	rss, hwm, err := readProcMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if rss <= 0 || hwm < rss {
		t.Errorf("the test binary's VmRSS %d, VmHWM %d: want 0 < RSS ≤ HWM", rss, hwm)
	}
	if _, _, err := readProcMemory(1 << 30); err == nil {
		t.Error("a process that does not exist was read")
	}
}

func TestPeaks(t *testing.T) {
	s := func(at time.Duration, role string, rss, hwm int64) MemSample {
		return MemSample{At: at, Role: role, RSS: rss, HWM: hwm}
	}
	samples := []MemSample{
		s(0, "gateway", 10, 10), s(time.Second, "gateway", 50, 50), s(2*time.Second, "gateway", 20, 50),
		s(time.Second, "worker-1", 5, 7), s(3*time.Second, "worker-1", 9, 9),
	}
	tests := []struct {
		name     string
		from, to time.Duration
		want     map[string]MemPeak
	}{
		{"all", 0, 0, map[string]MemPeak{"gateway": {50, 50}, "worker-1": {9, 9}}},
		{"window", 2 * time.Second, 3 * time.Second, map[string]MemPeak{"gateway": {20, 50}}},
		{"none", 10 * time.Second, 0, map[string]MemPeak{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, peaks(samples, tt.from, tt.to)); diff != "" {
				t.Errorf("peaks (-want +got):\n%s", diff)
			}
		})
	}
}
