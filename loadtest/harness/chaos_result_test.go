package harness

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// chaosFixture is six messages that between them take every path of the
// accounting.
func chaosFixture(start time.Time) ([]Send, []Delivery) {
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	try := func(ms, status int, took time.Duration) Attempt {
		return Attempt{At: at(ms), Took: took, Status: status}
	}
	send := func(seq int64, status int, id string, replayed bool, attempts ...Attempt) Send {
		return Send{Seq: seq, Tenant: "t", At: attempts[0].At, Status: status, ID: id, Replayed: replayed, Attempts: attempts}
	}
	sends := []Send{
		// 1: accepted at once, delivered once.
		send(1, 202, "a1", false, try(0, 202, 5*time.Millisecond)),
		// 2: 503 first, then accepted; delivered twice, the second time
		// under another id and first-received time.
		send(2, 202, "a2", false, try(10, 503, 2*time.Second), try(2100, 202, 5*time.Millisecond)),
		// 3: cut in transport, then a replay of the first acceptance;
		// the application fails its first push.
		send(3, 200, "a3", true, try(20, 0, time.Millisecond), try(200, 200, 3*time.Millisecond)),
		// 4: accepted, never delivered: lost.
		send(4, 202, "a4", false, try(30, 202, 4*time.Millisecond)),
		// 5: 503 until the client gave up, yet delivered.
		send(5, 503, "", false, try(40, 503, 100*time.Millisecond), try(1200, 503, 300*time.Millisecond)),
		// 6: accepted, dead-lettered, delivered by the redrive.
		send(6, 202, "a6", false, try(50, 202, 4*time.Millisecond)),
	}
	ok := func(seq int64, id, first string, ms int) Delivery {
		return Delivery{Seq: seq, MsgID: id, FirstReceivedAt: first, Start: at(ms), End: at(ms + 20), Status: 200}
	}
	failed := ok(3, "a3", "T3", 300)
	failed.Status = 500
	redriven := ok(6, "d6", "T6", 5000)
	redriven.Redriven = true
	deliveries := []Delivery{
		ok(1, "a1", "T1", 100),
		ok(2, "a2", "T2", 2200), ok(2, "b2", "T2b", 4000),
		failed, ok(3, "a3", "T3", 900),
		ok(5, "x5", "T5", 1500),
		redriven,
	}
	return sends, deliveries
}

func TestChaosAnalyse(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sends, deliveries := chaosFixture(start)
	samples := []MemSample{{At: time.Second, Role: "gateway", RSS: 30 << 20, HWM: 31 << 20}, {At: 2 * time.Second, Role: "worker-1", RSS: 20 << 20, HWM: 20 << 20}}
	r := &ChaosResult{Start: start, Drained: true}
	r.analyse(sends, deliveries, samples)

	type counts struct {
		Sent, Accepted, Delivered, Lost, DeadLettered, Replayed, Duplicates, Retried, RetriedDuplicates int
		Unacknowledged, FailedPushes, Answers5xx, SplitMsgid, SplitFirstReceived, ForeignMsgid          int
	}
	got := counts{r.Sent, r.Accepted, r.Delivered, r.Lost, r.DeadLettered, r.Replayed, r.Duplicates, r.Retried, r.RetriedDuplicates,
		r.Unacknowledged, r.FailedPushes, r.Answers5xx, r.SplitMsgid, r.SplitFirstReceived, r.ForeignMsgid}
	want := counts{Sent: 6, Accepted: 5, Delivered: 4, Lost: 1, DeadLettered: 1, Replayed: 1, Duplicates: 1, Retried: 2, RetriedDuplicates: 1,
		Unacknowledged: 1, FailedPushes: 1, Answers5xx: 3, SplitMsgid: 1, SplitFirstReceived: 1, ForeignMsgid: 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"202": 4, "503": 3, "transport": 1, "200": 1}, r.Answers); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"503": 1}, r.Refused); diff != "" {
		t.Errorf("refused (-want +got):\n%s", diff)
	}
	if r.Latency503.N != 3 || r.Latency503.Max != 2*time.Second || r.Latency503.P50 != 300*time.Millisecond || r.SlowestAnswer != 2*time.Second {
		t.Errorf("503 latency %+v, slowest answer %v", r.Latency503, r.SlowestAnswer)
	}
	if diff := cmp.Diff([]int64{4}, r.LostSeqs); diff != "" {
		t.Errorf("lost (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]MemPeak{"gateway": {30 << 20, 31 << 20}, "worker-1": {20 << 20, 20 << 20}}, r.Memory); diff != "" {
		t.Errorf("memory (-want +got):\n%s", diff)
	}
}

func TestChaosChecks(t *testing.T) {
	zero := 0
	strict := Expectations{MaxRetriedDuplicates: &zero, Max503Latency: time.Second, MaxRSS: 300 << 20, MaxRSSAfter: 1.5,
		MaxDeliveryDelay: 2 * time.Second, MaxOtherP99: 50 * time.Millisecond}
	good := func() *ChaosResult {
		return &ChaosResult{
			Fault:    Fault{Deliver: time.Minute, After: time.Minute, Expect: strict},
			Accepted: 10, Delivered: 10, Drained: true, Retried: 3,
			Latency503: Quantiles{N: 3, Max: 900 * time.Millisecond},
			SlowBody:   &SlowBody{Opened: 200, RSSBefore: 30 << 20, RSSMax: 200 << 20, RSSAfter: 40 << 20, Others: Quantiles{N: 50, P99: 20 * time.Millisecond}},
			Trials:     []RestartTrial{{Accepted: true, Delay: time.Second}, {Accepted: true, Delay: 1900 * time.Millisecond}},
		}
	}
	tests := []struct {
		name     string
		change   func(r *ChaosResult)
		wantFail []string // the checks that fail
	}{
		{"all met", func(*ChaosResult) {}, nil},
		{"lost", func(r *ChaosResult) { r.Lost, r.Delivered = 1, 9 }, []string{"accepted messages lost"}},
		{"not drained", func(r *ChaosResult) { r.Drained, r.Leftover = false, 4 }, []string{"accepted messages lost"}},
		{"retried duplicate", func(r *ChaosResult) { r.RetriedDuplicates = 1 }, []string{"duplicates of messages first answered 503 or cut in transport"}},
		{"slow 503", func(r *ChaosResult) { r.Latency503.Max = 15 * time.Second }, []string{"slowest 503"}},
		{"gateway memory", func(r *ChaosResult) { r.SlowBody.RSSMax = 2 << 30 }, []string{"gateway RSS with 200 slow connections"}},
		{"aborted attack", func(r *ChaosResult) { r.SlowBody.Aborted = true }, []string{"gateway RSS with 200 slow connections"}},
		{"memory kept", func(r *ChaosResult) { r.SlowBody.RSSAfter = 100 << 20 }, []string{"gateway RSS 60.00 s after the connections closed"}},
		{"gateway killed", func(r *ChaosResult) { r.SlowBody.Killed, r.SlowBody.Aborted = true, true },
			[]string{"gateway RSS with 200 slow connections", "gateway RSS 60.00 s after the connections closed"}},
		{"others slow", func(r *ChaosResult) { r.SlowBody.Others.P99 = 60 * time.Millisecond }, []string{"other tenants' p99 send latency during the attack"}},
		{"others never measured", func(r *ChaosResult) { r.SlowBody.Others = Quantiles{} }, []string{"other tenants' p99 send latency during the attack"}},
		{"late delivery", func(r *ChaosResult) { r.Trials[1].Delay = 5 * time.Second }, []string{"each message after a restart delivered within"}},
		{"never delivered", func(r *ChaosResult) { r.Trials[0].Delay = -1 }, []string{"each message after a restart delivered within"}},
		{"no rounds", func(r *ChaosResult) { r.Trials = nil }, []string{"each message after a restart delivered within"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := good()
			tt.change(r)
			r.Checks = r.check()
			if len(r.Checks) != 7 {
				t.Fatalf("%d checks, want 7: %+v", len(r.Checks), r.Checks)
			}
			var failed []string
			for _, c := range r.Checks {
				if !c.Pass {
					failed = append(failed, c.Name)
				}
			}
			if diff := cmp.Diff(tt.wantFail, failed); diff != "" {
				t.Errorf("failed checks (-want +got):\n%s", diff)
			}
			if r.Pass() != (len(tt.wantFail) == 0) {
				t.Errorf("Pass() = %t", r.Pass())
			}
		})
	}
}

func TestChaosAsserted(t *testing.T) {
	r := &ChaosResult{Accepted: 1, Delivered: 1, Drained: true, SlowBody: &SlowBody{RSSMax: 1 << 30},
		Fault: Fault{Expect: Expectations{MaxRSS: 300 << 20}}}
	r.Checks = r.check()
	if got := r.Asserted(); len(got) != 1 || got[0].Name != "accepted messages lost" {
		t.Errorf("not enforced: asserted %+v, want only the lost check", got)
	}
	r.Fault.Expect.Enforced = true
	if got := r.Asserted(); len(got) != 2 {
		t.Errorf("enforced: asserted %+v, want both checks", got)
	}
}
