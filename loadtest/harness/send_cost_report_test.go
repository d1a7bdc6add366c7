package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSummariseSendCost(t *testing.T) {
	const ms = time.Millisecond
	run := func(round int, window time.Duration, send, other float64, p50, p99 time.Duration, load string) SendCost {
		return SendCost{Round: round, Window: window, Sent: 1000, Accepted: 1000,
			Requests:       map[string]float64{opSend: send * 1000, "ReceiveMessage": other * 1000},
			Steady:         map[string]float64{opSend: send * 500, "ReceiveMessage": other * 400},
			SteadyAdmitted: 500,
			Latency:        Quantiles{P50: p50, P99: p99}, LoadAvg: [2]string{load, load}}
	}
	// Three rounds of two windows, interleaved as they run; the second
	// round was slow throughout, and in the third the machine held up the
	// run without a window: left out, with the round's other.
	late := run(3, 0, 0.1, 0.1, ms, 900*ms, "20.0")
	late.Late = DisturbedLate + ms
	runs := []SendCost{
		run(1, 0, 1.0, 0.3, 12*ms, 20*ms, "1.50"),
		run(1, 5*ms, 0.5, 0.3, 15*ms, 26*ms, "1.20"),
		run(2, 0, 0.9, 0.4, 14*ms, 60*ms, "10.5"),
		run(2, 5*ms, 0.4, 0.4, 17*ms, 64*ms, "9.00"),
		late,
		run(3, 5*ms, 0.45, 0.35, 16*ms, 45*ms, "2.00"),
	}
	got := SummariseSendCost(runs)
	want := []SendCostRow{
		{Window: 0, Runs: 2, LeftOut: 1, SendPerMessage: 0.95, PerMessage: 1.3, SteadyPerMessage: 0.95 + 0.28, P50: 13 * ms, P99: 40 * ms, AddedP99: 0, HasAdded: true, LoadAvg: [2]float64{1.5, 10.5}},
		// The p99 added is the median of the rounds' own differences (6
		// and 4 ms), not the difference of the medians; the third round
		// has none.
		{Window: 5 * ms, Runs: 3, SendPerMessage: 0.45, PerMessage: 0.8, SteadyPerMessage: 0.45 + 0.28, P50: 16 * ms, P99: 45 * ms, AddedP99: 5 * ms, HasAdded: true, LoadAvg: [2]float64{1.2, 9}},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 })); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	var b strings.Builder
	WriteSendCostTable(&b, got)
	for _, line := range []string{
		"| 0s | 0.950 | 1.300 | 1.230 | 13.0 ms | 40.0 ms | — | 2 (1) | 1.5–10.5 |",
		"| 5ms | 0.450 | 0.800 | 0.730 | 16.0 ms | 45.0 ms | +5.0 ms | 3 (0) | 1.2–9.0 |",
	} {
		if !strings.Contains(b.String(), line+"\n") {
			t.Errorf("table lacks %q:\n%s", line, b.String())
		}
	}
	if rows := SummariseSendCost(runs[3:4]); len(rows) != 1 || rows[0].HasAdded {
		t.Errorf("without a run at 0 no p99 is added: %+v", rows)
	}
}
