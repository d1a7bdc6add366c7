package harness

import (
	"math"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestQuantiles(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		ds := make([]time.Duration, len(v))
		for i, x := range v {
			ds[i] = time.Duration(x) * time.Millisecond
		}
		return ds
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100 … 1, unsorted
	}
	tests := []struct {
		name string
		in   []time.Duration
		want Quantiles
	}{
		{"empty", nil, Quantiles{}},
		{"one", ms(7), Quantiles{N: 1, P50: 7 * time.Millisecond, P95: 7 * time.Millisecond, P99: 7 * time.Millisecond, Max: 7 * time.Millisecond}},
		{"nearest rank", ms(hundred...), Quantiles{N: 100, P50: 50 * time.Millisecond, P95: 95 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond}},
		{"two", ms(10, 20), Quantiles{N: 2, P50: 10 * time.Millisecond, P95: 20 * time.Millisecond, P99: 20 * time.Millisecond, Max: 20 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, quantiles(tt.in)); diff != "" {
				t.Errorf("quantiles (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJain(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		want float64
	}{
		{"equal", []float64{5, 5, 5, 5}, 1},
		{"one takes all", []float64{10, 0, 0, 0}, 0.25},
		{"none", nil, 1},
		{"all zero", []float64{0, 0}, 1},
		{"two to one", []float64{2, 1}, 9.0 / 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := jain(tt.in); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("jain(%v) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

// testResult is a small run: two quiet tenants and a poison one, ten
// seconds of load with two of warmup, and a message of each fate.
func testResult() *Result {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	sc := Scenario{
		Name: "test", Duration: 10 * time.Second, Warmup: 2 * time.Second,
		Tenants: []Tenant{
			{ID: "quiet-1", Role: RoleQuiet, Rate: 1},
			{ID: "quiet-2", Role: RoleQuiet, Rate: 1},
			{ID: "poison", Role: RolePoison, Rate: 1, PoisonEvery: 1},
		},
	}
	sent := func(seq int64, tenant string, d time.Duration, status int) Send {
		return Send{Seq: seq, Tenant: tenant, At: at(d), Status: status, Poison: tenant == "poison", Code: map[int]string{429: "backlog_full"}[status]}
	}
	deliver := func(seq int64, tenant string, enq, start time.Duration, status int, redriven bool) Delivery {
		return Delivery{Seq: seq, Tenant: tenant, EnqueuedAt: at(enq), Start: at(start), End: at(start + 100*time.Millisecond), Status: status, Redriven: redriven}
	}
	return &Result{
		Scenario: sc, Mode: ModeShuffle, Start: start, Drained: true,
		Sends: []Send{
			sent(1, "quiet-1", 3*time.Second, http.StatusAccepted),
			sent(2, "quiet-1", 4*time.Second, http.StatusAccepted),
			sent(3, "quiet-2", 5*time.Second, http.StatusAccepted),
			sent(4, "poison", 5*time.Second, http.StatusAccepted),
			sent(5, "quiet-2", 6*time.Second, http.StatusTooManyRequests),
			sent(6, "quiet-2", time.Second, http.StatusAccepted), // in the warmup
		},
		Deliveries: []Delivery{
			deliver(1, "quiet-1", 3*time.Second, 3*time.Second+20*time.Millisecond, 200, false),
			deliver(2, "quiet-1", 4*time.Second, 4*time.Second+40*time.Millisecond, 200, false),
			deliver(2, "quiet-1", 4*time.Second, 9*time.Second, 200, false), // a duplicate
			deliver(4, "poison", 5*time.Second, 5*time.Second+10*time.Millisecond, 500, false),
			deliver(4, "poison", 5*time.Second, 6*time.Second, 500, false),
			deliver(4, "poison", 5*time.Second, 20*time.Second, 200, true), // redriven
			deliver(6, "quiet-2", time.Second, time.Second+5*time.Millisecond, 200, false),
			deliver(99, "quiet-2", 5*time.Second, 5*time.Second, 200, false), // its send failed, yet it went through
		},
	}
}

func TestAnalyseAccounting(t *testing.T) {
	r := testResult()
	r.analyse()
	want := Accounting{
		Sent: 6, Accepted: 5, Rejected: map[string]int{"429 backlog_full": 1},
		Processed: 3, DeadLettered: 1, Lost: 1, Duplicates: 1, Unacknowledged: 1,
		PoisonAccepted: 1, PoisonDeadLettered: 1, LostSeqs: []int64{3},
	}
	if diff := cmp.Diff(want, r.Accounting); diff != "" {
		t.Errorf("accounting (-want +got):\n%s", diff)
	}
	if r.Accounting.Balanced() {
		t.Error("Balanced() = true with a lost message")
	}
	outcomes := map[int64]Outcome{}
	for _, m := range r.Messages {
		outcomes[m.Seq] = m.Outcome
	}
	wantOutcomes := map[int64]Outcome{1: OutcomeProcessed, 2: OutcomeProcessed, 3: OutcomeLost, 4: OutcomeDeadLettered, 6: OutcomeProcessed}
	if diff := cmp.Diff(wantOutcomes, outcomes); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
}

func TestBalanced(t *testing.T) {
	tests := []struct {
		name string
		a    Accounting
		want bool
	}{
		{"all processed", Accounting{Accepted: 3, Processed: 3}, true},
		{"poison dead-lettered", Accounting{Accepted: 3, Processed: 2, DeadLettered: 1, PoisonAccepted: 1, PoisonDeadLettered: 1}, true},
		{"lost", Accounting{Accepted: 3, Processed: 2, Lost: 1}, false},
		{"good message dead-lettered", Accounting{Accepted: 3, Processed: 2, DeadLettered: 1, GoodDeadLettered: 1}, false},
		{"poison processed", Accounting{Accepted: 3, Processed: 3, PoisonAccepted: 1}, false},
		{"both", Accounting{Accepted: 1, Both: 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Balanced(); got != tt.want {
				t.Errorf("Balanced() = %t, want %t", got, tt.want)
			}
		})
	}
}

func TestAnalyseStats(t *testing.T) {
	r := testResult()
	r.analyse()
	window := 8.0 // seconds from the warmup to the end
	got := map[string]TenantStats{}
	for _, st := range r.Tenants {
		got[st.ID] = st
	}
	q1 := got["quiet-1"]
	if q1.Latency.N != 2 || q1.Latency.P50 != 20*time.Millisecond || q1.Latency.Max != 40*time.Millisecond {
		t.Errorf("quiet-1 latency %+v, want 2 messages, 20 ms and 40 ms", q1.Latency)
	}
	if q1.Goodput != 2/window || q1.Offered != 2/window {
		t.Errorf("quiet-1 offered %v goodput %v, want %v each", q1.Offered, q1.Goodput, 2/window)
	}
	// quiet-2: its warmup message is left out, the lost one has no
	// latency, the refused one counts as offered only.
	q2 := got["quiet-2"]
	if q2.Latency.N != 0 || q2.Offered != 2/window || q2.Accepted != 1/window || q2.Goodput != 0 {
		t.Errorf("quiet-2 %+v", q2)
	}
	if r.Quiet.Latency.N != 2 || r.Quiet.Goodput != 2/window {
		t.Errorf("quiet pooled %+v", r.Quiet)
	}
	if want := jain([]float64{2 / window, 0}); r.Jain != want {
		t.Errorf("Jain = %v, want %v", r.Jain, want)
	}
	if q1.Shard == "" {
		t.Error("no shard for quiet-1")
	}
}

// outageResult is a run of 30 s, one quiet tenant, with an outage from
// 5 s to 15 s, its messages and samples left to the test.
func outageResult() *Result {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sc := Scenario{Name: "outage", Duration: 30 * time.Second, Warmup: time.Second, Outage: Outage{At: 5 * time.Second, For: 10 * time.Second},
		Tenants: []Tenant{{ID: "quiet-1", Role: RoleQuiet, Rate: 10}}}
	return &Result{Scenario: sc, Start: start, OutageStart: start.Add(5 * time.Second), OutageEnd: start.Add(15 * time.Second)}
}

func TestRecovery(t *testing.T) {
	r := outageResult()
	// Ten messages a second: 20 ms before the outage; those sent during
	// it start 1 s after the restart; after the restart, 3 s for the
	// first 2 s, then 22 ms.
	for i := range 300 {
		sent := time.Duration(i) * 100 * time.Millisecond
		lat := 20 * time.Millisecond
		switch {
		case sent >= 5*time.Second && sent < 15*time.Second:
			lat = 16*time.Second - sent
		case sent >= 15*time.Second && sent < 17*time.Second:
			lat = 3 * time.Second
		case sent >= 15*time.Second:
			lat = 22 * time.Millisecond
		}
		r.Messages = append(r.Messages, Message{Seq: int64(i), Tenant: "quiet-1", Sent: sent, Latency: lat, Outcome: OutcomeProcessed})
	}
	rc := r.recovery()
	want := &Recovery{
		Baseline: 20 * time.Millisecond, Threshold: 24 * time.Millisecond,
		Before:         Judged{P95: 20 * time.Millisecond, All: 20 * time.Millisecond, Kept: 40},
		Fresh:          Judged{P95: 22 * time.Millisecond, All: 22 * time.Millisecond, Kept: 100},
		RecoveredAfter: 2 * time.Second, FreshP95: 22 * time.Millisecond,
		BacklogCleared: time.Second, BacklogClearedInLoad: true,
	}
	if diff := cmp.Diff(want, rc, cmpopts.IgnoreFields(Recovery{}, "Buckets")); diff != "" {
		t.Errorf("recovery (-want +got):\n%s", diff)
	}
	if len(rc.Buckets) != 15 || rc.Buckets[0] != 3*time.Second || rc.Buckets[14] != 22*time.Millisecond {
		t.Errorf("buckets %v: want 15, from 3 s to 22 ms", rc.Buckets)
	}

	// Slow from 22 s on, in seconds of steal: left out of FreshP95, not
	// of the buckets.
	slow := slices.Clone(r.Messages)
	for i := range slow {
		if slow[i].Sent >= 22*time.Second {
			slow[i].Latency = time.Second
		}
	}
	for s := range 31 {
		stolen := uint64(0)
		if s > 22 {
			stolen = uint64(20 * (s - 22)) // 10% of 200 ticks a second from 22 s
		}
		r.CPU = append(r.CPU, CPUSample{At: time.Duration(s) * time.Second, Steal: stolen, Total: uint64(200 * s)})
	}
	r.Messages = slow
	rc = r.recovery()
	if rc.FreshP95 != 22*time.Millisecond || rc.Fresh.All != time.Second || rc.Fresh.Kept != 20 || rc.Fresh.LeftOut != 80 || rc.Buckets[14] != time.Second {
		t.Errorf("with steal from 22 s: FreshP95 %v, Fresh %+v, last bucket %v; want 22ms, 20 kept and 80 left out, 1s", rc.FreshP95, rc.Fresh, rc.Buckets[14])
	}
	if !rc.Fresh.Void() {
		t.Error("80 of 100 left out: judged")
	}
	r.CPU = nil

	// Slow to the end of the load: never recovered.
	for i := range r.Messages {
		if r.Messages[i].Sent >= 15*time.Second {
			r.Messages[i].Latency = time.Second
		}
	}
	if rc := r.recovery(); rc.RecoveredAfter != -1 || rc.FreshP95 != time.Second {
		t.Errorf("RecoveredAfter %v, FreshP95 %v with every message after the restart slow, want -1 and 1s", rc.RecoveredAfter, rc.FreshP95)
	}
}

func TestLoadResult(t *testing.T) {
	r := testResult()
	// 10% stolen from 4 s: quiet-1's message sent then left out.
	for s := range 12 {
		r.CPU = append(r.CPU, CPUSample{At: time.Duration(s) * time.Second, Steal: uint64(20 * max(0, s-4)), Total: uint64(200 * s)})
	}
	r.CPUUse = &CPUUse{Seconds: 61.2, ByRole: map[string]float64{roleGateways: 15.5, roleClients: 11}, Busy: 0.61, Cores: 2}
	r.analyse()
	if j := r.QuietJudged; j.Kept != 1 || j.LeftOut != 1 {
		t.Errorf("quiet tenants judged %+v: want 1 kept, 1 left out", j)
	}
	dir := t.TempDir()
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
	got, err := LoadResult(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Times go through milliseconds with one decimal.
	approx := cmpopts.EquateApproxTime(time.Millisecond)
	roundMS := cmp.Transformer("ms", func(d time.Duration) time.Duration { return d.Round(time.Millisecond) })
	if diff := cmp.Diff(r.Messages, got.Messages, roundMS); diff != "" {
		t.Errorf("messages (-wrote +read):\n%s", diff)
	}
	if diff := cmp.Diff(r, got, approx, cmpopts.IgnoreFields(Result{}, "Sends", "Deliveries", "Messages")); diff != "" {
		t.Errorf("result (-wrote +read):\n%s", diff)
	}
}
