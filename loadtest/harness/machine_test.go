package harness

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseCPUTimes(t *testing.T) {
	tests := []struct {
		line string
		want machineTimes
		ok   bool
	}{
		// guest and guest_nice are in user and nice already: not counted
		// twice. Idle counts iowait.
		{"cpu  100 2 30 800 5 0 3 60 40 1", machineTimes{Steal: 60, Idle: 805, Total: 1000}, true},
		{"cpu  100 2 30 800 5 0 3 60", machineTimes{Steal: 60, Idle: 805, Total: 1000}, true},
		{"cpu  100 2 30 800 5 0 3", machineTimes{}, false}, // no steal column (Linux before 2.6.11)
		{"cpu0 100 2 30 800 5 0 3 60 0 0", machineTimes{}, false},
		{"cpu  100 2 30 800 x 0 3 60 0 0", machineTimes{}, false},
		{"", machineTimes{}, false},
	}
	for _, tt := range tests {
		got, ok := parseCPUTimes(tt.line)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseCPUTimes(%q) = %+v, %v; want %+v, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
	if _, ok := cpuTimes(); !ok {
		t.Log("no /proc/stat here: runs sample no CPU time")
	}
}

// TestSteal: the hypervisor's share of the CPU over the windows a run is
// judged in, from the samples at or inside each window's edges.
func TestSteal(t *testing.T) {
	r := outageResult()
	// 200 ticks a second (two CPUs); none stolen before the outage, 10 a
	// second during it, 50 a second from the restart on.
	var steal, total uint64
	for s := range 31 {
		r.CPU = append(r.CPU, CPUSample{At: time.Duration(s)*time.Second + 10*time.Millisecond, Steal: steal, Total: total})
		total += 200
		switch {
		case s >= 15:
			steal += 50
		case s >= 5:
			steal += 10
		}
	}
	got := r.steal()
	// Load: samples at 1.01 s and 29.01 s, 800 of 5,600 ticks stolen.
	// Before: 1.01 s to 4.01 s, none. Fresh: 20.01 s to 29.01 s, 450 of
	// 1,800.
	near := cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })
	if diff := cmp.Diff(&Steal{Load: 800.0 / 5600, Before: 0, Fresh: 0.25}, got, near); diff != "" {
		t.Errorf("steal (-want +got):\n%s", diff)
	}
	r.Steal, r.Recovery = got, r.recovery()
	if note, want := r.stealNote(), "CPU steal 0.0% before the outage, 25.0% from 5s after the restart"; note != want {
		t.Errorf("note %q, want %q", note, want)
	}

	// Without an outage: the load's share only.
	r.Scenario.Outage, r.OutageStart, r.OutageEnd, r.Recovery = Outage{}, time.Time{}, time.Time{}, nil
	r.Steal = r.steal()
	if note, want := r.stealNote(), "CPU steal 14.3%"; note != want {
		t.Errorf("note %q, want %q", note, want)
	}

	// One sample in a window: its share unknown.
	r.CPU = r.CPU[:2]
	if got := r.steal(); got.Load != -1 {
		t.Errorf("share over one sample: %v, want -1", got.Load)
	}
	if s := stealShare(nil, 0, time.Minute); s != -1 {
		t.Errorf("share without samples: %v, want -1", s)
	}
	// Not sampled: no note.
	r.CPU, r.Steal = nil, nil
	if r.steal() != nil || r.stealNote() != "" {
		t.Error("a run without samples has a steal note")
	}
}

func TestStolen(t *testing.T) {
	// Samples every second, 200 ticks apart; 20 stolen (10%) between 2 s
	// and 3 s, 9 (4.5%) between 3 s and 4 s, 10 (5%) between 4 s and 5 s.
	var samples []CPUSample
	var steal uint64
	for s := range 6 {
		samples = append(samples, CPUSample{At: time.Duration(s) * time.Second, Steal: steal, Total: uint64(200 * s)})
		steal += map[int]uint64{2: 20, 3: 9, 4: 10}[s]
	}
	left := stolen(samples)
	for _, tt := range []struct {
		at   time.Duration
		want bool
	}{
		{-time.Second, false},
		{1500 * time.Millisecond, false},
		{2 * time.Second, true}, // an interval's start is in it
		{2999 * time.Millisecond, true},
		{3 * time.Second, false}, // 4.5%: under StealLeaveOut
		{4500 * time.Millisecond, true},
		{5 * time.Second, false}, // the last sample: no interval after it
		{time.Minute, false},
	} {
		if got := left(tt.at); got != tt.want {
			t.Errorf("stolen at %v: %t, want %t", tt.at, got, tt.want)
		}
	}
	if stolen(nil)(time.Second) {
		t.Error("without samples, a second counted as stolen")
	}
}

func TestJudge(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	// 20 messages of 1-20 ms; the four slowest sent in seconds of steal.
	var lat []time.Duration
	var left []bool
	for i := 20; i >= 1; i-- {
		lat = append(lat, ms(i))
		left = append(left, i > 16)
	}
	j := judge(lat, left)
	want := Judged{P95: ms(16), All: ms(19), Kept: 16, LeftOut: 4}
	if diff := cmp.Diff(want, j); diff != "" {
		t.Errorf("judge (-want +got):\n%s", diff)
	}
	if j.Void() {
		t.Error("4 of 20 left out: void")
	}
	if lat[0] != ms(20) {
		t.Error("judge sorted the latencies it was given")
	}
	// A quarter left out may be; one more may not.
	left[4] = true
	if j := judge(lat, left); j.Void() {
		t.Errorf("5 of 20 left out: %+v void", j)
	}
	left[5] = true
	if j := judge(lat, left); !j.Void() {
		t.Errorf("6 of 20 left out: %+v not void", j)
	}
	if !(Judged{}).Void() {
		t.Error("an empty window is judged")
	}
}
