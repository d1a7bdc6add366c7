package harness

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// quietResult is a run whose quiet tenants' p95 is p95 and Jain's index
// jain, with balanced accounting.
func quietResult(sc Scenario, m Mode, baseline bool, p95 time.Duration, jainIndex float64) *Result {
	r := &Result{Scenario: sc, Mode: m, Baseline: baseline, Drained: true, Jain: jainIndex,
		Accounting: Accounting{Accepted: 10, Processed: 10}}
	r.Quiet.Latency = Quantiles{N: 10, P50: p95 / 2, P95: p95, P99: p95, Max: p95}
	r.QuietJudged = judged(p95)
	for _, t := range sc.Tenants {
		st := TenantStats{ID: t.ID, Role: t.Role, Shard: "[0 1]", Latency: r.Quiet.Latency}
		r.Tenants = append(r.Tenants, st)
		for i := range 20 {
			r.Messages = append(r.Messages, Message{Tenant: t.ID, Sent: time.Duration(i) * 3 * time.Second, Latency: p95, Outcome: OutcomeProcessed})
		}
	}
	return r
}

// judged is a window of 100 messages whose p95 is p95, none left out.
func judged(p95 time.Duration) Judged { return Judged{P95: p95, All: p95, Kept: 100} }

func testScenarioResults(fullP95, fullFresh time.Duration) []*ScenarioResult {
	noisy, _ := NewScenario(ScenarioNoisy, false)
	n := &ScenarioResult{Scenario: noisy}
	n.Add(quietResult(noisy, ModeSingle, true, 50*time.Millisecond, 1))
	n.Add(quietResult(noisy, ModeSingle, false, 10*time.Second, 0.99))
	n.Add(quietResult(noisy, ModeFull, true, 50*time.Millisecond, 1))
	n.Add(quietResult(noisy, ModeFull, false, fullP95, 0.98))

	outage, _ := NewScenario(ScenarioOutage, false)
	o := &ScenarioResult{Scenario: outage}
	for _, m := range []Mode{ModeSingle, ModeFull} {
		r := quietResult(outage, m, false, time.Second, 1)
		r.Start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		r.OutageStart, r.OutageEnd = r.Start.Add(outage.Outage.At), r.Start.Add(outage.Outage.At+outage.Outage.For)
		r.Recovery = &Recovery{Baseline: 40 * time.Millisecond, Threshold: 48 * time.Millisecond, RecoveredAfter: 30 * time.Second,
			FreshP95: 10 * time.Second, BacklogCleared: 20 * time.Second, BacklogClearedInLoad: true}
		if m == ModeFull {
			r.Recovery.RecoveredAfter, r.Recovery.FreshP95 = time.Second, fullFresh
		}
		r.Recovery.Before, r.Recovery.Fresh = judged(r.Recovery.Baseline), judged(r.Recovery.FreshP95)
		o.Add(r)
	}
	return []*ScenarioResult{n, o}
}

func TestCriteria(t *testing.T) {
	verdicts := func(cs []Criterion) []string {
		var v []string
		for _, c := range cs {
			switch {
			case c.Missing:
				v = append(v, "missing")
			case c.Pass:
				v = append(v, "pass")
			default:
				v = append(v, "fail")
			}
		}
		return v
	}
	tests := []struct {
		name string
		rs   []*ScenarioResult
		want []string
	}{
		{"all pass", testScenarioResults(55*time.Millisecond, 45*time.Millisecond),
			[]string{"pass", "pass", "pass", "pass", "pass", "pass", "pass"}},
		{"full mode hurt, slow recovery", testScenarioResults(70*time.Millisecond, 60*time.Millisecond),
			[]string{"fail", "pass", "pass", "fail", "pass", "pass", "pass"}},
		{"nothing run", nil,
			[]string{"missing", "missing", "missing", "missing", "missing", "missing", "missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, verdicts(Criteria(tt.rs))); diff != "" {
				t.Errorf("verdicts (-want +got):\n%s", diff)
			}
		})
	}

	rs := testScenarioResults(55*time.Millisecond, 45*time.Millisecond)
	rs[0].Runs[ModeFull].Accounting.Lost = 1
	cs := Criteria(rs)
	if last := cs[len(cs)-1]; last.Pass || !strings.Contains(last.Measured, "1 lost") {
		t.Errorf("accounting criterion %+v with a lost message, want a failure naming it", last)
	}
}

func TestWriteReport(t *testing.T) {
	dir := t.TempDir()
	rs := testScenarioResults(55*time.Millisecond, 45*time.Millisecond)
	text, err := WriteReport(dir, rs, Environment{Command: "go run ./loadtest/fairness", Machine: "2 CPUs", Version: "fairq test", Date: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	saved, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil || string(saved) != string(text) {
		t.Fatalf("report.md: %v, or not what was returned", err)
	}
	for _, want := range []string{"## Done when", "| full fairq |", "![", "noisy.png", "outage.png", "**pass**", "go run ./loadtest/fairness"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, name := range []string{"noisy.png", "outage.png"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b := img.Bounds(); b.Dx() < 1000 || b.Dy() < 400 {
			t.Errorf("%s is %v, too small to read", name, b)
		}
	}
}
