package harness

import (
	"bytes"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/config"
)

func TestFleetConfigYAML(t *testing.T) {
	sc, err := NewScenario(ScenarioNoisy, false)
	if err != nil {
		t.Fatal(err)
	}
	masters := []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"}
	tests := []struct {
		name      string
		services  Services
		wantMode  string
		wantAddr  string
		wantAddrs []string
	}{
		{"single", Services{SQSEndpoint: "http://127.0.0.1:9324", RedisAddr: "127.0.0.1:6379"}, config.RedisSingle, "127.0.0.1:6379", nil},
		{"cluster", Services{SQSEndpoint: "http://127.0.0.1:9324", RedisCluster: masters}, config.RedisCluster, "", masters},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := systemConfig{scenario: sc, mode: ModeFleet, backend: backendSQS, services: tt.services, prefix: "lt0123abcd",
				pushURL: "http://127.0.0.1:9999/", creds: newCredentials(sc.Tenants), gateways: FleetGateways}
			cfg, err := config.Parse(c.yaml(), func(string) string { return "" })
			if err != nil {
				t.Fatalf("fairq rejects the generated configuration: %v\n%s", err, c.yaml())
			}
			if cfg.Redis.Mode != tt.wantMode || cfg.Redis.Addr != tt.wantAddr || !slices.Equal(cfg.Redis.Addrs, tt.wantAddrs) {
				t.Errorf("redis %+v, want mode %q, addr %q, addrs %q", cfg.Redis, tt.wantMode, tt.wantAddr, tt.wantAddrs)
			}
			if got := tt.services.topology(); got != tt.name {
				t.Errorf("topology %q, want %q", got, tt.name)
			}
		})
	}
}

func TestSinkCountsInFlightPerTenant(t *testing.T) {
	eachApplication(t, []Tenant{{ID: "acme", Work: 300 * time.Millisecond}, {ID: "globex", Work: time.Millisecond}}, testSinkCountsInFlight)
}

func testSinkCountsInFlight(t *testing.T, s application) {
	push := func(tenant string) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.url(), strings.NewReader(`{}`))
		req.Header.Set(headerTenant, tenant)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
	}
	// Three of acme's pushes overlap (each takes 300 ms, as from three
	// workers); globex's come one after the other.
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { push("acme") })
	}
	for range 3 {
		push("globex")
	}
	wg.Wait()
	push("acme") // alone: the peak stays
	if err := s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"acme": 3, "globex": 1}
	if diff := cmp.Diff(want, s.maxInFlight()); diff != "" {
		t.Errorf("most in flight at once (-want +got):\n%s", diff)
	}
}

// rateRun builds a run of one tenant, "t", from a plan: per second of the
// run, the messages accepted and the pushes begun (each a first push of
// the oldest message waiting).
func rateRun(accepted, pushes []int) *Result {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &Result{Start: start, Scenario: Scenario{Duration: time.Duration(len(accepted)) * time.Second, Warmup: 2 * time.Second,
		Tenants: []Tenant{{ID: "t", Rate: 1}}, Limits: Limits{ProcessRate: 10}}}
	seq := int64(0)
	for k, n := range accepted {
		for i := range n {
			seq++
			at := start.Add(time.Duration(k)*time.Second + time.Duration(i)*time.Second/time.Duration(n+1))
			r.Sends = append(r.Sends, Send{Seq: seq, Tenant: "t", At: at, Took: time.Millisecond, Status: http.StatusAccepted})
		}
	}
	next := int64(0)
	for k, n := range pushes {
		for i := range n {
			next++
			at := start.Add(time.Duration(k)*time.Second + time.Duration(i)*time.Second/time.Duration(n+1))
			r.Deliveries = append(r.Deliveries, Delivery{Seq: next, Tenant: "t", Start: at, End: at.Add(time.Millisecond), Status: http.StatusOK})
		}
	}
	return r
}

func TestRateBound(t *testing.T) {
	repeat := func(n, v int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = v
		}
		return s
	}
	tests := []struct {
		name     string
		accepted []int
		pushes   []int
		outage   [2]time.Duration // workers down from, ready at
		want     RateBound
		wantOK   bool
	}{
		{
			// 100 waiting from the start, 10 started each second: bound
			// from second 0 on while at least 10 wait; seconds 0 and 1
			// are the warmup.
			name: "held at its rate", accepted: append([]int{100}, repeat(9, 0)...), pushes: repeat(10, 10),
			want: RateBound{Tenant: "t", Seconds: 7, Starts: 70, Rate: 10}, wantOK: true,
		},
		{
			name: "above its rate", accepted: append([]int{200}, repeat(9, 0)...), pushes: repeat(10, 15),
			want: RateBound{Tenant: "t", Seconds: 8, Starts: 120, Rate: 15}, wantOK: true,
		},
		{
			// 80 arrive in second 5 and 30 start at once (the burst);
			// seconds 6–9 begin with 10 or more waiting, and the first
			// of them, which may still spend burst, is not counted.
			name: "burst left out", accepted: []int{0, 0, 0, 0, 0, 80, 0, 0, 0, 0}, pushes: []int{0, 0, 0, 0, 0, 30, 12, 10, 10, 10},
			want: RateBound{Tenant: "t", Seconds: 3, Starts: 30, Rate: 10}, wantOK: true,
		},
		{
			name: "never waits for its rate", accepted: repeat(10, 5), pushes: repeat(10, 5),
		},
		{
			// Workers down from 3 s to ready at 6 s: seconds 3–5 are not
			// counted, and 6 begins a new stretch.
			name: "outage left out", accepted: []int{0, 0, 0, 100, 0, 0, 0, 0, 0, 0}, pushes: []int{0, 0, 0, 0, 0, 0, 30, 10, 10, 10},
			outage: [2]time.Duration{3 * time.Second, 6 * time.Second},
			want:   RateBound{Tenant: "t", Seconds: 3, Starts: 30, Rate: 10}, wantOK: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rateRun(tt.accepted, tt.pushes)
			if tt.outage[1] > 0 {
				r.OutageStart, r.WorkersReady = r.Start.Add(tt.outage[0]), r.Start.Add(tt.outage[1])
			}
			got, ok := r.rateBound("t", r.Scenario.Limits.ProcessRate)
			if ok != tt.wantOK {
				t.Fatalf("rate-bound %t, want %t (%+v)", ok, tt.wantOK, got)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("rate-bound (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWithinRate(t *testing.T) {
	lim := Limits{ProcessRate: 40, ProcessBurst: 40, Concurrency: 10}
	for _, tt := range []struct {
		starts, seconds int
		want            bool
	}{
		{400, 10, true},
		{360, 10, true},
		{359, 10, false}, // 35.9/s
		{200, 10, false},
		{480, 10, true},  // 44/s and the burst: 440 + 40
		{481, 10, false}, // one start more than the limits allow
		{266, 6, true},   // 44.3/s over 6 s: 264 + 40 allowed
		{305, 6, false},
	} {
		rb := RateBound{Tenant: "t", Seconds: tt.seconds, Starts: tt.starts, Rate: float64(tt.starts) / float64(tt.seconds)}
		if got := withinRate(rb, lim); got != tt.want {
			t.Errorf("withinRate(%d starts over %d s) = %t, want %t", tt.starts, tt.seconds, got, tt.want)
		}
	}
}

// fleetResult returns a fleet run of the noisy scenario that meets every
// check, and its baseline, for TestFleetChecks to spoil.
func fleetResult() *FleetResult {
	sc := noisy(false)
	sc.Workers = FleetWorkers
	run := &Result{Scenario: sc, Mode: ModeFleet, Drained: true, Gateways: FleetGateways,
		Accounting: Accounting{Accepted: 100, Processed: 100},
		Quiet:      TenantStats{Latency: Quantiles{P95: 11 * time.Millisecond}}, QuietJudged: judged(11 * time.Millisecond),
		LimitsSeen: &LimitsSeen{MaxInFlight: map[string]int64{"noisy": 10, "quiet-1": 2},
			Rates: []RateBound{{Tenant: "noisy", Seconds: 49, Starts: 1960, Rate: 40}}}}
	base := &Result{Scenario: sc.WithoutOthers(), Mode: ModeFleet, Baseline: true, Drained: true,
		Accounting: Accounting{Accepted: 50, Processed: 50},
		Quiet:      TenantStats{Latency: Quantiles{P95: 10 * time.Millisecond}}, QuietJudged: judged(10 * time.Millisecond)}
	return &FleetResult{Scenario: sc, Redis: RedisSingle, Run: run, Baseline: base}
}

// baselineAfter returns a copy of fr's baseline, as if run again after
// the run, with the quiet tenants' p95 at p95.
func baselineAfter(fr *FleetResult, p95 time.Duration) *Result {
	b := *fr.Baseline
	b.Quiet.Latency.P95, b.QuietJudged = p95, judged(p95)
	return &b
}

func TestFleetChecks(t *testing.T) {
	tests := []struct {
		name     string
		spoil    func(*FleetResult)
		wantFail string // the check that fails, by a word of its name; "" for none
	}{
		{"all met", func(*FleetResult) {}, ""},
		{"concurrency exceeded", func(fr *FleetResult) { fr.Run.LimitsSeen.MaxInFlight["noisy"] = 11 }, "Concurrency"},
		{"rate too high", func(fr *FleetResult) {
			rb := &fr.Run.LimitsSeen.Rates[0]
			rb.Starts = rb.Seconds*45 + 1
			rb.Rate = float64(rb.Starts) / float64(rb.Seconds)
		}, "Rate"},
		{"rate too low", func(fr *FleetResult) { fr.Run.LimitsSeen.Rates[0].Rate = 30 }, "Rate"},
		{"quiet tenants slowed", func(fr *FleetResult) { fr.Run.QuietJudged = judged(13 * time.Millisecond) }, "Latency"},
		// Seconds of steal are left out: judged by the messages kept, and
		// told.
		{"slowed only in seconds of steal", func(fr *FleetResult) {
			fr.Run.QuietJudged = Judged{P95: 11 * time.Millisecond, All: 13 * time.Millisecond, Kept: 80, LeftOut: 20}
		}, ""},
		{"slowed in the seconds kept", func(fr *FleetResult) {
			fr.Run.QuietJudged = Judged{P95: 13 * time.Millisecond, All: 11 * time.Millisecond, Kept: 80, LeftOut: 20}
		}, "Latency"},
		{"a message lost", func(fr *FleetResult) { fr.Run.Accounting.Lost, fr.Run.Accounting.Processed = 1, 99 }, "Nothing lost"},
		{"baseline not drained", func(fr *FleetResult) { fr.Baseline.Drained = false }, "Nothing lost"},
		// With the baseline run again after the run, the run is compared
		// with the mean of the two: 13 ms against 10 and 12 ms is 1.18×.
		{"slower than the baseline before, not the mean", func(fr *FleetResult) {
			fr.Run.QuietJudged = judged(13 * time.Millisecond)
			fr.BaselineAfter = baselineAfter(fr, 12*time.Millisecond)
		}, ""},
		{"slower than the mean of the baselines", func(fr *FleetResult) {
			fr.Run.QuietJudged = judged(13 * time.Millisecond)
			fr.BaselineAfter = baselineAfter(fr, 10*time.Millisecond)
		}, "Latency"},
		{"baseline after lost a message", func(fr *FleetResult) {
			fr.BaselineAfter = baselineAfter(fr, 10*time.Millisecond)
			fr.BaselineAfter.Accounting.Lost = 1
		}, "Nothing lost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fr := fleetResult()
			tt.spoil(fr)
			cs := FleetChecks(fr)
			if len(cs) != 4 {
				t.Fatalf("%d checks, want 4: %+v", len(cs), cs)
			}
			for _, c := range cs {
				if c.Missing {
					t.Errorf("%s: not measured (%s)", c.Name, c.Measured)
				}
				wantPass := tt.wantFail == "" || !strings.HasPrefix(c.Name, tt.wantFail)
				if c.Pass != wantPass {
					t.Errorf("%s: pass %t, want %t (measured %s)", c.Name, c.Pass, wantPass, c.Measured)
				}
			}
		})
	}
}

// TestLatencyLeftOut checks how the latency criterion tells the messages
// sent in seconds of steal that it left out, and that it is not judged
// when more than LeftOutMost of a window's were.
func TestLatencyLeftOut(t *testing.T) {
	tests := []struct {
		name  string
		run   Judged
		base  Judged
		want  string
		judge bool
	}{
		{"none left out", judged(11 * time.Millisecond), judged(10 * time.Millisecond), "11 ms vs 10 ms: 1.10×", true},
		{"a fifth of the run's", Judged{P95: 11 * time.Millisecond, All: 13 * time.Millisecond, Kept: 80, LeftOut: 20}, judged(10 * time.Millisecond),
			"11 ms vs 10 ms: 1.10× (left out, sent in seconds of ≥5% CPU steal: 20 of 200 messages; with every message: 13 ms vs 10 ms: 1.30×)", true},
		{"a third of the run's", Judged{P95: 11 * time.Millisecond, All: 13 * time.Millisecond, Kept: 70, LeftOut: 30}, judged(10 * time.Millisecond),
			"not judged: 30 of 100 messages of a window sent in seconds of ≥5% CPU steal, more than 25%; with every message: 13 ms vs 10 ms: 1.30×", false},
		{"a third of the baseline's", judged(11 * time.Millisecond), Judged{P95: 10 * time.Millisecond, All: 9 * time.Millisecond, Kept: 70, LeftOut: 30},
			"not judged: 30 of 100 messages of a window sent in seconds of ≥5% CPU steal, more than 25%; with every message: 11 ms vs 9.0 ms: 1.22×", false},
		{"none kept", Judged{P95: 0, All: 13 * time.Millisecond, Kept: 0, LeftOut: 0}, judged(10 * time.Millisecond),
			"not judged: a window has no messages; with every message: 13 ms vs 10 ms: 1.30×", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fr := fleetResult()
			fr.Run.QuietJudged, fr.Baseline.QuietJudged = tt.run, tt.base
			c := FleetChecks(fr)[2]
			if !strings.HasPrefix(c.Name, "Latency") {
				t.Fatalf("third check is %q", c.Name)
			}
			if c.Missing == tt.judge || !strings.HasSuffix(c.Measured, tt.want) {
				t.Errorf("judged %t, measured %q; want judged %t, ending %q", !c.Missing, c.Measured, tt.judge, tt.want)
			}
		})
	}
}

func TestFleetChecksOutage(t *testing.T) {
	sc := outage(false)
	r := &Result{Scenario: sc, Mode: ModeFleet, Drained: true, Accounting: Accounting{Accepted: 10, Processed: 10},
		Recovery: &Recovery{Baseline: 10 * time.Millisecond, Threshold: 12 * time.Millisecond, FreshP95: 30 * time.Millisecond,
			Before: judged(10 * time.Millisecond), Fresh: judged(30 * time.Millisecond)},
		LimitsSeen: &LimitsSeen{MaxInFlight: map[string]int64{"quiet-1": 3}}}
	cs := FleetChecks(&FleetResult{Scenario: sc, Redis: RedisCluster, Run: r})
	got := map[string]string{}
	for _, c := range cs {
		verdict := "pass"
		switch {
		case c.Missing:
			verdict = "missing"
		case !c.Pass:
			verdict = "fail"
		}
		got[strings.Fields(c.Name)[0]] = verdict
	}
	want := map[string]string{"Concurrency:": "pass", "Rate:": "missing", "Latency:": "fail", "Nothing": "pass"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("checks (-want +got):\n%s", diff)
	}
}

// TestFleetReportBaselineAfter checks that the report compares each quiet
// tenant with the mean of its baselines before and after the run, and
// tells how far the two drifted apart.
func TestFleetReportBaselineAfter(t *testing.T) {
	fr := fleetResult()
	fr.Run.Tenants = []TenantStats{{ID: "quiet-1", Role: "quiet", Latency: Quantiles{P95: 11 * time.Millisecond}}}
	fr.Baseline.Tenants = []TenantStats{{ID: "quiet-1", Role: "quiet", Latency: Quantiles{P95: 8 * time.Millisecond}}}
	fr.BaselineAfter = baselineAfter(fr, 12*time.Millisecond)
	fr.BaselineAfter.Tenants = []TenantStats{{ID: "quiet-1", Role: "quiet", Latency: Quantiles{P95: 12 * time.Millisecond}}}
	fr.Run.Steal = &Steal{Load: 0.012}
	fr.Run.CPUUse = &CPUUse{Seconds: 60, ByRole: map[string]float64{roleGateways: 15.6, roleSQS: 12}, Busy: 0.614, Cores: 2}
	report, err := WriteFleetReport(t.TempDir(), []*FleetResult{fr}, Environment{Command: "fairness", Date: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"11 ms vs 11 ms (before 10 ms, after 12 ms): 1.00×",
		"was 12 ms after the run and 10 ms before it: 1.20×",
		"| quiet-1 | quiet | 0.0 / 0.0 / 0.0 | 11 ms | 10 ms |",
		"baseline after: 50 accepted",
		"load average – → –, CPU steal 1.2%; CPU over the load, in cores: gateways 0.26, SQS emulator 0.20; the machine 61% busy of its 2 cores. ",
		"Baseline: sends late by p99 0.0 ms, load average – → –. ", // no CPU use read
	} {
		if !bytes.Contains(report, []byte(want)) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

func TestControlCores(t *testing.T) {
	use := func(roles map[string]float64) *CPUUse {
		return &CPUUse{Seconds: 10, ByRole: roles, Busy: 0.5, Cores: 2}
	}
	tests := []struct {
		name  string
		setup func(*FleetResult)
		want  float64
	}{
		{"the run's added CPU, the clients' apart", func(fr *FleetResult) {
			fr.Run.CPUUse = use(map[string]float64{roleGateways: 2.7, roleWorkers: 4, roleSQS: 2.3, roleClients: 1.8})
			fr.Baseline.CPUUse = use(map[string]float64{roleGateways: 0.8, roleWorkers: 1.4, roleSQS: 1, roleClients: 0.3})
		}, 0.58},
		{"the mean of two baselines", func(fr *FleetResult) {
			fr.Run.CPUUse = use(map[string]float64{roleWorkers: 6})
			fr.Baseline.CPUUse = use(map[string]float64{roleWorkers: 1})
			fr.BaselineAfter = baselineAfter(fr, 10*time.Millisecond)
			fr.BaselineAfter.CPUUse = use(map[string]float64{roleWorkers: 2})
		}, 0.45},
		{"nothing added", func(fr *FleetResult) {
			fr.Run.CPUUse = use(map[string]float64{roleWorkers: 1})
			fr.Baseline.CPUUse = use(map[string]float64{roleWorkers: 2})
		}, 0},
		{"no CPU use read in the run", func(fr *FleetResult) {
			fr.Baseline.CPUUse = use(map[string]float64{roleWorkers: 1})
		}, 0},
		{"no CPU use read in a baseline", func(fr *FleetResult) {
			fr.Run.CPUUse = use(map[string]float64{roleWorkers: 6})
		}, 0},
		{"no baseline", func(fr *FleetResult) {
			fr.Run.CPUUse = use(map[string]float64{roleWorkers: 6})
			fr.Baseline = nil
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fr := fleetResult()
			tt.setup(fr)
			if got := ControlCores(fr); got != tt.want {
				t.Errorf("ControlCores = %g, want %g", got, tt.want)
			}
		})
	}
}

func TestFleetReportControl(t *testing.T) {
	fr := fleetResult()
	c := *fr.Baseline
	c.Burn, c.Quiet.Latency.P95, c.QuietJudged = 0.7, 14*time.Millisecond, judged(14*time.Millisecond)
	c.Accounting = Accounting{Accepted: 50, Processed: 49, Lost: 1}
	c.CPUUse = &CPUUse{Seconds: 60, ByRole: map[string]float64{roleWorkers: 8.4, roleBurner: 42.6}, Busy: 0.6, Cores: 2}
	fr.Control = &c
	report, err := WriteFleetReport(t.TempDir(), []*FleetResult{fr}, Environment{Command: "fairness", Date: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Contention control: the quiet tenants alone once more, beside a process burning 0.70 cores (it burnt 0.71) in bursts of at most 250µs at normal priority",
		"their p95 was 14 ms, 1.40× the baselines' 10 ms, where the run with the noisy tenant had 11 ms, 1.10×.",
		"Control: sends late by p99 0.0 ms, load average – → –; CPU over the load, in cores: workers 0.14, burn process (the control's) 0.71; the machine 60% busy of its 2 cores.",
		// The control loses nothing either.
		"control: 50 accepted, 49 delivered, 1 lost",
		"11 ms vs 10 ms: 1.10× | met |", // judged against the baselines only
	} {
		if !bytes.Contains(report, []byte(want)) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	// Without a control, nothing is said of one.
	fr.Control = nil
	report, err = WriteFleetReport(t.TempDir(), []*FleetResult{fr}, Environment{Command: "fairness", Date: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(report, []byte("ontrol")) {
		t.Errorf("report without a control tells of one:\n%s", report)
	}
}
