package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSummariseSendCost(t *testing.T) {
	const ms = time.Millisecond
	run := func(window time.Duration, send, other float64, p50, p99 time.Duration, load string) SendCost {
		return SendCost{Window: window, Accepted: 1000,
			Requests: map[string]float64{opSend: send * 1000, "ReceiveMessage": other * 1000},
			Latency:  Quantiles{P50: p50, P99: p99}, LoadAvg: [2]string{load, load}}
	}
	// Two rounds of two windows, interleaved as they run; the second
	// round was slow throughout.
	runs := []SendCost{
		run(0, 1.0, 0.3, 12*ms, 20*ms, "1.50"),
		run(5*ms, 0.5, 0.3, 15*ms, 26*ms, "1.20"),
		run(0, 0.9, 0.4, 14*ms, 60*ms, "10.5"),
		run(5*ms, 0.4, 0.4, 17*ms, 64*ms, "9.00"),
	}
	got := SummariseSendCost(runs)
	want := []SendCostRow{
		{Window: 0, Runs: 2, SendPerMessage: 0.95, PerMessage: 1.3, P50: 13 * ms, P99: 40 * ms, AddedP99: 0, HasAdded: true, LoadAvg: [2]float64{1.5, 10.5}},
		// The p99 added is the median of the rounds' own differences (6
		// and 4 ms), not the difference of the medians.
		{Window: 5 * ms, Runs: 2, SendPerMessage: 0.45, PerMessage: 0.8, P50: 16 * ms, P99: 45 * ms, AddedP99: 5 * ms, HasAdded: true, LoadAvg: [2]float64{1.2, 9}},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 })); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	var b strings.Builder
	WriteSendCostTable(&b, got)
	for _, line := range []string{
		"| 0s | 0.950 | 1.300 | 13.0 ms | 40.0 ms | — | 2 | 1.5–10.5 |",
		"| 5ms | 0.450 | 0.800 | 16.0 ms | 45.0 ms | +5.0 ms | 2 | 1.2–9.0 |",
	} {
		if !strings.Contains(b.String(), line+"\n") {
			t.Errorf("table lacks %q:\n%s", line, b.String())
		}
	}
	if rows := SummariseSendCost(runs[1:2]); len(rows) != 1 || rows[0].HasAdded {
		t.Errorf("without a run at 0 no p99 is added: %+v", rows)
	}
}
